"""The sidecar builder: every running part of the core, wired from one Settings.

`build_runtime` makes the engine, the broker adapter and its poller, the signals to
producers (change fan-out, producer registry, bindings cache, webhook outbox and delivery)
and the records (history, recent depths, metrics), and connects them through the engine's
listener lists and the poller's snapshot hooks. It knows nothing of HTTP: the composition
root (`api.main`) hands it the settings store and mounts the API on what it returns.
`Runtime.run()` is the background work (polling, webhook delivery) until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from sidecar.broker import BrokerAdapter
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.config import Settings
from sidecar.flow.engine import FlowEngine
from sidecar.flow.persistence import FlowStore
from sidecar.flow.poller import Poller
from sidecar.records.history import HistoryRecorder
from sidecar.records.metrics import FlowCollector, metrics_registry
from sidecar.records.recent_depths import RecentDepths
from sidecar.signals.bindings_cache import TopologyCache
from sidecar.signals.change_fanout import ChangeHub
from sidecar.signals.event_json import webhook_event
from sidecar.signals.grant_desk import GrantDesk
from sidecar.signals.producers import ProducerRegistry
from sidecar.signals.webhook_delivery import RetryPolicy, WebhookDelivery
from sidecar.signals.webhook_outbox import WebhookOutbox


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
    delivery: WebhookDelivery
    recorder: HistoryRecorder
    recent: RecentDepths
    metrics: CollectorRegistry

    async def run(self) -> None:
        """Poll the broker and deliver webhooks until cancelled; then release the broker
        connection and flush the history (the store is closed by whoever opened it)."""
        poll = asyncio.create_task(self.poller.run(), name="poller")
        deliver = asyncio.create_task(self.delivery.run(), name="webhooks")
        try:
            await asyncio.gather(poll, deliver)
        finally:
            for task in (poll, deliver):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.broker.close()
            self.recorder.close()


def rabbitmq_adapter(settings: Settings) -> RabbitMQAdapter:
    """The broker adapter the options name."""
    return RabbitMQAdapter(
        settings.management_url, settings.management_user,
        settings.management_password.get_secret_value(), timeout=settings.request_timeout)


def forget_silent(producers: ProducerRegistry, now: float) -> None:
    """Poll hook: drop producers past their ttl (their queues' answers change)."""
    producers.sweep(now)


def build_runtime(settings: Settings, store: FlowStore,
                  adapter: BrokerAdapter | None = None) -> Runtime:
    """Wire every part of the core; nothing runs until `Runtime.run()`."""
    engine = FlowEngine(store, settings.default_policy, stale_after=settings.stale_after,
                        on_stale=settings.on_stale)
    broker = adapter or rabbitmq_adapter(settings)
    poller = Poller(broker, engine, settings.poll_interval)
    hub = ChangeHub()
    engine.listeners.append(hub.on_change)
    engine.version_watchers.append(hub.on_version)
    outbox = WebhookOutbox(store, functools.partial(webhook_event, engine.entry))
    engine.store_listeners.append(outbox.on_change)
    delivery = WebhookDelivery(
        outbox, timeout=settings.webhook_timeout, concurrency=settings.webhook_concurrency,
        retention=settings.webhook_retention,
        retry=RetryPolicy(settings.webhook_backoff_base, settings.webhook_backoff_max,
                          settings.webhook_give_up_after))
    producers = ProducerRegistry(
        ttl=settings.producer_ttl,
        reaction_seconds=settings.broker_stats_lag + settings.poll_interval)
    poller.on_snapshot.append(lambda _, now: forget_silent(producers, now))
    recorder = HistoryRecorder(
        settings.history_path, interval=settings.history_interval,
        retention_days=settings.history_retention_days, capacity=producers.capacity)
    poller.on_snapshot.append(lambda _, now: recorder.on_poll(engine, now))
    engine.listeners.append(recorder.on_change)
    recent = RecentDepths()  # the dashboard's sparklines
    poller.on_snapshot.append(recent.on_snapshot)
    grants = GrantDesk(engine, stats_lag=settings.broker_stats_lag, lease=settings.grant_lease,
                       lease_max=settings.grant_lease_max)
    poller.on_snapshot.append(lambda _, now: grants.on_poll(now))
    engine.version_watchers.append(grants.on_version)
    return Runtime(
        settings=settings, store=store, engine=engine, broker=broker, poller=poller, hub=hub,
        producers=producers, grants=grants, topology=TopologyCache(broker, max_age=settings.poll_interval),
        outbox=outbox, delivery=delivery, recorder=recorder, recent=recent,
        metrics=metrics_registry(FlowCollector(engine, poller, webhook_stats=outbox)))
