"""Prometheus metrics for `/metrics`, read from the engine's table at scrape time.

A custom collector rather than Gauges the engine keeps up to date: the table already holds
every figure, so a scrape is one pass over it and the flow path does no metrics
bookkeeping. Names follow rabbitmq_prometheus (`rabbitmq_queue_messages`,
`rabbitmq_queue_messages_bytes`, labels `vhost` and `queue`) under the `flow_sidecar_`
prefix. The only per-queue labels are vhost and queue, so the series count grows with the
broker's queues and never with producers or requests. This collector holds the aggregates
over queues; the per-queue series are written by `sidecar.records.queue_series`, which
stays fast at 10,000 queues, and only when `--metrics-per-queue` says so.

Everything the collector reads comes through its constructor (engine, poller, clock, the
webhook outbox), so tests feed it a real engine and read values back with
`registry.get_sample_value`; there is no global registry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sidecar.flow.engine import FlowEngine
from sidecar.flow.live_sampler import LiveSampler
from sidecar.flow.poller import Poller

PREFIX = "flow_sidecar_"
QUEUE_LABELS = ("vhost", "queue")


class WebhookStats(Protocol):
    """What the collector needs from webhook delivery (`WebhookOutbox` has both)."""

    def outbox_depth(self) -> int:
        """Events waiting for delivery."""
        ...

    def failures_total(self) -> int:
        """Delivery attempts that failed since start."""
        ...


class FlowCollector:
    """Queue aggregates, poller health and, when given, webhook delivery, collected on
    every scrape."""

    def __init__(
        self,
        engine: FlowEngine,
        poller: Poller,
        *,
        webhook_stats: WebhookStats | None = None,
        live: LiveSampler | None = None,
        warning_episodes: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.poller = poller
        self.webhook_stats = webhook_stats
        self.live = live
        self.warning_episodes = warning_episodes
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        """Every family, built from the current table (the Collector protocol)."""
        yield from self._queues()
        yield from self._poller()
        yield from self._live()
        yield from self._webhooks()

    def _queues(self) -> Iterator[Metric]:
        """Aggregates over every queue, always exported; the per-queue series are
        `sidecar.records.queue_series`, exported per `--metrics-per-queue`."""
        stopped = stale = warned = paced = classes_stopped = 0
        for entry in self.engine.entries():
            stopped += entry.told_stopped
            stale += entry.stale
            warned += entry.warned
            paced += entry.pacing.engaged
            if entry.classes_held:
                classes_stopped += sum(s.stopped for s in entry.class_states.values())
        yield GaugeMetricFamily(PREFIX + "queues_flow_stopped", "Queues whose producers are "
                                "told they are flow stopped.", value=stopped)
        yield GaugeMetricFamily(PREFIX + "queues_warned", "Queues warned that they near "
                                "their stop (docs/graded-flow.md).", value=warned)
        if self.warning_episodes is not None:  # recorded: a deleted queue's stay counted
            yield CounterMetricFamily(PREFIX + "warnings_total", "Warning episodes started, "
                                      "over every queue recorded, deleted ones included.",
                                      value=self.warning_episodes())
        yield GaugeMetricFamily(PREFIX + "classes_stopped", "Producer classes stopped, "
                                "over every queue's classes (docs/graded-flow.md).",
                                value=classes_stopped)
        yield GaugeMetricFamily(PREFIX + "queues_paced", "Queues whose producers are paced "
                                "(offered suggestedRate).", value=paced)
        yield GaugeMetricFamily(PREFIX + "queues_stale", "Queues whose last depth sample is "
                                "older than --stale-after.", value=stale)

    def _poller(self) -> Iterator[Metric]:
        engine, poller = self.engine, self.poller
        yield GaugeMetricFamily(PREFIX + "queues", "Queues the broker reported at the last "
                                "successful poll.", value=engine.queue_count())
        yield CounterMetricFamily(PREFIX + "poll_cycles_total", "Broker polls finished, "
                                  "successful or not.", value=poller.cycles)
        yield CounterMetricFamily(PREFIX + "poll_errors_total", "Broker polls that failed.",
                                  value=poller.errors)
        yield GaugeMetricFamily(PREFIX + "poll_consecutive_failures", "Broker polls that "
                                "failed since the last successful one.",
                                value=engine.poll_failures)
        if poller.last_cycle_seconds is not None:
            yield GaugeMetricFamily(PREFIX + "poll_duration_seconds", "How long the last "
                                    "poll cycle took.", value=poller.last_cycle_seconds)
        lag = GaugeMetricFamily(PREFIX + "statistics_lag_seconds", "How far the broker's "
                                "statistics lag behind: the option, the lag measured from "
                                "live samples, and the larger, in use.", labels=["kind"])
        lag.add_metric(["configured"], engine.configured_lag)
        measured = engine.lag_meter.measured()
        if measured is not None:
            lag.add_metric(["measured"], measured)
        lag.add_metric(["effective"], engine.statistics_lag)
        yield lag
        age = math.inf if engine.last_poll_at is None else self.clock() - engine.last_poll_at
        yield GaugeMetricFamily(PREFIX + "poll_age_seconds", "Seconds since the last "
                                "successful poll (+Inf before the first): how stale every "
                                "answer is.", value=age)
        now = self.clock()
        yield GaugeMetricFamily(PREFIX + "queues_without_depth", "Queues the broker has "
                                "listed without a depth for longer than --stale-after "
                                "(all of them: its statistics are off).",
                                value=poller.gaps.without_depth(now))
        yield GaugeMetricFamily(PREFIX + "alarms_unreadable", "1 while no node of the broker "
                                "reports its memory or disk alarm (statistics off).",
                                value=float(poller.gaps.alarms_unreadable(now)))

    def _live(self) -> Iterator[Metric]:
        live = self.live
        yield GaugeMetricFamily(PREFIX + "live_connected", "1 while live depth reads the "
                                "hot queues over AMQP; 0 while it cannot (statistics only) "
                                "or is off.", value=float(bool(live and live.connected)))
        if live is None:
            return
        yield GaugeMetricFamily(PREFIX + "live_hot_queues", "Queues in the hot set at the last "
                                "live depth round.", value=live.hot)
        if live.hot_gap.last is not None:
            yield GaugeMetricFamily(PREFIX + "live_hot_read_gap_seconds", "The longest wait "
                                    "between two live reads of one hot queue, over the last "
                                    "whole 10 s.", value=live.hot_gap.last)
        yield CounterMetricFamily(PREFIX + "live_samples_total", "Live depth samples "
                                  "applied.", value=live.samples)
        yield CounterMetricFamily(PREFIX + "live_errors_total", "Live depth rounds that "
                                  "could not read every queue asked for.", value=live.errors)

    def _webhooks(self) -> Iterator[Metric]:
        stats = self.webhook_stats
        if stats is None:
            return
        yield GaugeMetricFamily(PREFIX + "webhook_outbox_depth", "Webhook events waiting "
                                "for delivery.", value=stats.outbox_depth())
        yield CounterMetricFamily(PREFIX + "webhook_failures_total", "Webhook delivery "
                                  "attempts that did not succeed.",
                                  value=stats.failures_total())


def metrics_registry(collector: FlowCollector) -> CollectorRegistry:
    """A registry of its own per app (no process-wide state), holding only `collector`."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
