"""The sidecar builder: every running part of the core, wired from one Settings.

`build_runtime` makes the engine, the broker adapter and its poller, the live sampler
(the hot queues' depth between polls, when the broker offers a live source), the signals to
producers (change fan-out, producer registry, bindings cache, webhook outbox and delivery)
and the records (history, recent depths, metrics), and connects them through the engine's
listener lists and the poller's snapshot hooks. It knows nothing of HTTP: the composition
root (`api.main`) hands it the settings store and mounts the API on what it returns.
`Runtime.run()` is the background work (polling, live sampling, webhook delivery) until
cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry

from sidecar.broker import BrokerAdapter, LiveDepthSource, QueueDeclarer
from sidecar.broker.rabbitmq_live import RabbitMQLiveDepth
from sidecar.broker.rabbitmq_prometheus import RabbitMQDepthSources
from sidecar.broker.select import adapter_for
from sidecar.cluster.shared_outbox import SharedOutbox
from sidecar.cluster.wiring import SharedParts, share_through_broker
from sidecar.config import Settings
from sidecar.flow.engine import FlowEngine
from sidecar.flow.hot_set import HotPolicy
from sidecar.flow.live_sampler import LiveSampler
from sidecar.flow.persistence import FlowStore
from sidecar.flow.poller import Poller
from sidecar.records.broker_wide_metrics import BrokerWideCollector
from sidecar.records.filled_by import FilledBy, reported_in
from sidecar.records.grant_metrics import GrantCollector
from sidecar.records.history import HistoryRecorder
from sidecar.records.metrics import FlowCollector, metrics_registry
from sidecar.records.recent_depths import RecentDepths
from sidecar.records.warning_episodes import record_episodes
from sidecar.settings_writes import LocalWrites, Writes
from sidecar.signals.bindings_cache import TopologyCache
from sidecar.signals.change_fanout import ChangeHub
from sidecar.signals.event_json import webhook_event
from sidecar.signals.grant_desk import GrantDesk
from sidecar.signals.grant_record import GrantRecord
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.producers import ProducerRegistry
from sidecar.signals.webhook_delivery import RetryPolicy, WebhookDelivery
from sidecar.signals.webhook_outbox import WebhookOutbox
from sidecar.signals.webhook_targets import TargetPolicy, checked_transport

log = logging.getLogger("flow_sidecar")


class BackgroundWork(Protocol):
    """Work that runs until cancelled (webhook delivery, local or through the cluster)."""

    async def run(self) -> None:
        ...


@dataclass
class Runtime:
    """The parts of a running sidecar, for the API layer and for tests."""

    settings: Settings
    store: FlowStore
    engine: FlowEngine
    broker: BrokerAdapter
    poller: Poller
    hub: ChangeHub
    producers: ProducerRegistry
    grants: GrantDesk
    topology: TopologyCache
    outbox: WebhookOutbox
    delivery: BackgroundWork
    recorder: HistoryRecorder
    recent: RecentDepths
    filled: FilledBy  # who filled each queue at its last stop
    metrics: CollectorRegistry
    writes: Writes  # what the API changes goes through here
    live: LiveSampler | None = None  # None: statistics only
    # set when the broker fixes thresholds at declare time (Qpid C++): writes declare
    declarer: QueueDeclarer | None = None
    shared: SharedParts | None = None  # with --shared-state broker
    # what producers say they published (X-Producer-Published): memory only
    reports: ProducerReports = field(default_factory=ProducerReports)

    async def run(self) -> None:
        """Poll the broker, sample hot queues and deliver webhooks until cancelled; then
        release the broker connections and flush the history (the store is closed by
        whoever opened it)."""
        tasks = [asyncio.create_task(self.poller.run(), name="poller"),
                 asyncio.create_task(self.delivery.run(), name="webhooks")]
        if self.live is not None:
            tasks.append(asyncio.create_task(self.live.run(), name="live-depth"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.broker.close()
            self.recorder.close()


def live_sampler(settings: Settings, source: LiveDepthSource, engine: FlowEngine,
                 producers: ProducerRegistry) -> LiveSampler:
    """The live sampler the options describe; it rescans the hot set after every poll."""
    return LiveSampler(source, engine, HotPolicy(
        band=settings.live_band, horizon=settings.broker_stats_lag + settings.poll_interval,
        interval=settings.live_interval), budget=settings.live_budget,
        idle_budget=settings.live_idle_budget, producer_queues=producers.queues)


def forget_silent(producers: ProducerRegistry, now: float) -> None:
    """Poll hook: drop producers past their ttl (their queues' answers change)."""
    producers.sweep(now)


def warn_if_defaults_override(engine: FlowEngine) -> None:
    """Stored defaults (PUT /defaults) win over the start-up options, restarts included:
    an operator who restarts with new flags must hear that they do not apply."""
    if engine.defaults != engine.startup_defaults:
        log.warning("default thresholds stored through PUT /defaults override the start-up "
                    "options: %s in effect, not %s; DELETE /defaults (flow-config defaults "
                    "--reset) returns to the options", engine.defaults.as_flags(),
                    engine.startup_defaults.as_flags())


def build_runtime(settings: Settings, store: FlowStore, adapter: BrokerAdapter | None = None,
                  live_source: LiveDepthSource | None = None) -> Runtime:
    """Wire every part of the core; nothing runs until `Runtime.run()`. Without `adapter`,
    the RabbitMQ the options name, with its live source unless --no-live-depth; with
    one, live sampling only from the `live_source` given along."""
    engine = FlowEngine(store, settings.default_policy, stale_after=settings.stale_after,
                        on_stale=settings.on_stale, statistics_lag=settings.broker_stats_lag)
    engine.writes.startup_warning = settings.startup_warning
    warn_if_defaults_override(engine)
    broker = adapter or adapter_for(settings)
    if live_source is None and adapter is None and settings.live_depth \
            and isinstance(broker, RabbitMQDepthSources):  # passive declares: RabbitMQ only
        live_source = RabbitMQLiveDepth(settings.live_amqp_url, timeout=settings.request_timeout,
                                        cluster_name=broker.management.fetch_cluster_name)
    # every GET of a read gets four request timeouts (sidecar.broker.failover); a whole
    # read that has not ended after six is worth an operator's look
    poller = Poller(broker, engine, settings.poll_interval,
                    read_deadline=max(6 * settings.request_timeout, 3 * settings.poll_interval))
    hub = ChangeHub()
    engine.listeners.append(hub.on_change)
    engine.journal.warning_listeners.append(hub.on_warning)
    engine.version_watchers.append(hub.on_version)
    shared = settings.shared_state == "broker"
    outbox = (SharedOutbox if shared else WebhookOutbox)(
        store, functools.partial(webhook_event, engine.entry))
    engine.store_listeners.append(outbox.on_change)
    engine.journal.warning_store_listeners.append(outbox.on_warning)
    episodes = record_episodes(engine, store)  # numbering goes on after a restart
    delivery = WebhookDelivery(
        outbox, timeout=settings.webhook_timeout, concurrency=settings.webhook_concurrency,
        retention=settings.webhook_retention,
        transport=checked_transport(TargetPolicy(settings.webhook_allow_private)),
        retry=RetryPolicy(settings.webhook_backoff_base, settings.webhook_backoff_max,
                          settings.webhook_give_up_after))
    producers = ProducerRegistry(
        ttl=settings.producer_ttl,
        reaction_seconds=settings.broker_stats_lag + settings.poll_interval)
    poller.on_snapshot.append(lambda _, now: forget_silent(producers, now))
    filled = FilledBy()
    engine.told.stop_note = filled.stop_note
    poller.on_snapshot.append(lambda _, now: filled.sweep(now))
    recorder = HistoryRecorder(
        settings.history_path, interval=settings.history_interval,
        retention_days=settings.history_retention_days, capacity=producers.capacity,
        top_producers=filled.top_json)
    poller.on_snapshot.append(lambda _, now: recorder.on_poll_in_slices(engine, now))
    engine.listeners.append(recorder.on_change)
    engine.journal.warning_listeners.append(recorder.on_warning)
    engine.version_watchers.append(lambda key: recorder.settings.on_version(engine, key))
    recent = RecentDepths()  # the dashboard's sparklines
    poller.on_snapshot.append(recent.on_snapshot_in_slices)
    live = None
    if live_source is not None and settings.live_depth:
        live = live_sampler(settings, live_source, engine, producers)
        poller.on_snapshot.append(lambda _, __: live.rescan_in_slices())
        live.on_samples.append(lambda samples, now: recorder.on_live(engine, samples, now))
    metrics = metrics_registry(FlowCollector(engine, poller, webhook_stats=outbox, live=live,
                                             warning_episodes=episodes.total))
    metrics.register(BrokerWideCollector(engine))
    grants = GrantDesk(engine, lease=settings.grant_lease,
                       lease_max=settings.grant_lease_max, record=GrantRecord(store))
    poller.on_snapshot.append(lambda _, now: grants.on_poll(now))
    grants.on_granted = filled.granted
    if live is not None:  # a new upper bound may settle confirmed credit: asks try again
        live.on_samples.append(lambda _, __: grants.wake())
        grants.on_confirmed = live.hurry
    metrics.register(GrantCollector(grants))
    engine.version_watchers.append(grants.on_version)
    runtime = Runtime(
        settings=settings, store=store, engine=engine, broker=broker, poller=poller, hub=hub,
        producers=producers, grants=grants,
        topology=TopologyCache(broker, max_age=settings.poll_interval),
        outbox=outbox, delivery=delivery, recorder=recorder, recent=recent, filled=filled,
        metrics=metrics, writes=LocalWrites(engine, outbox), live=live,
        declarer=broker if isinstance(broker, QueueDeclarer) else None)
    filled.reports = reported_in(runtime.reports)
    runtime.reports.on_new_producer = recorder.settings.pacing_used
    poller.on_snapshot.append(lambda _, now: runtime.reports.on_poll(now))
    if isinstance(outbox, SharedOutbox):
        runtime.shared = share_through_broker(settings, engine=engine, store=store,
                                              outbox=outbox, poller=poller,
                                              local_delivery=delivery,
                                              reports=runtime.reports, filled=filled)
        runtime.writes = runtime.shared.writes
        runtime.delivery = runtime.shared.work
        grants.gate = runtime.shared.owners.refusal
        grants.id_prefix = runtime.shared.owners.id + "."
        grants.foreign_until = runtime.shared.owners.foreign_until
        grants.cover = runtime.shared.credit.cover
        runtime.shared.credit.held = grants.held_vhosts
        poller.on_snapshot.append(runtime.shared.credit.on_poll)
    return runtime
