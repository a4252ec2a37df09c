"""The /metrics collector over a real engine and a real poller, fed QueueInfo records.

No broker: a scripted adapter stands where RabbitMQ would be, and the poller's own
`poll_once` runs against it, so poll health comes from the code that produces it. Values
are read back with `registry.get_sample_value`, as prometheus_client's own tests do; the
per-queue series (`sidecar.records.queue_series`, written as text) are read back by
prometheus_client's own parser.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from api.store import Store
from sidecar.broker import BrokerError
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.engine import FlowEngine
from sidecar.flow.poller import Poller
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.records.metrics import FlowCollector, metrics_registry
from sidecar.records.queue_series import QueueSeries, exported
from sidecar.signals.exchange_routing import Topology
from sidecar.signals.pacing_offers import PacingOffers
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.producers import ProducerRegistry

NO_DEFAULTS = DefaultPolicy(stop_percent=0, resume_percent=0, queue_limit=0)


def q(name: str, messages: int | None, nbytes: int | None = 0,
      **arguments: object) -> QueueInfo:
    return QueueInfo("/", name, messages, nbytes, arguments=arguments)


@dataclass
class ScriptedBroker:
    """Answers each poll with the next item: a list of queues, or an error to raise."""

    answers: list[list[QueueInfo] | BrokerError] = field(default_factory=list)

    def fetch_queues(self) -> list[QueueInfo]:
        answer = self.answers.pop(0)
        if isinstance(answer, BrokerError):
            raise answer
        return answer

    def fetch_topology(self) -> Topology:
        raise BrokerError("not used")

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        return {}  # a broker without alarms

    def fetch_vhosts(self) -> set[str]:
        raise BrokerError("not used")

    def close(self) -> None:
        pass


@dataclass
class Rig:
    """A real engine and poller on a settable clock, with the collector's registry."""

    broker: ScriptedBroker
    engine: FlowEngine
    poller: Poller
    registry: CollectorRegistry
    now: list[float]

    def poll(self, answer: list[QueueInfo] | BrokerError, at: float) -> None:
        self.now[0] = at
        self.broker.answers.append(answer)
        asyncio.run(self.poller.poll_once())

    def value(self, name: str, queue: str | None = None) -> float | None:
        """A sample of the registry, or of the per-queue series for a queue's."""
        if queue is None:
            return self.registry.get_sample_value(name)
        return queue_samples(self.engine).get((name, "/", queue))


def queue_samples(engine: FlowEngine,
                  series: QueueSeries | None = None) -> dict[tuple[str, str, str], float]:
    """Every per-queue sample of one scrape, by (name, vhost, queue), as Prometheus reads
    the text."""
    scrape = (series or QueueSeries()).scrape()
    entries = engine.entries()
    scrape.add(entries[:1])  # in slices, as the route adds them
    scrape.add(entries[1:])
    return {(s.name, s.labels["vhost"], s.labels["queue"]): s.value
            for family in text_string_to_metric_families(scrape.text().decode())
            for s in family.samples}


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    now = [1000.0]
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), NO_DEFAULTS, stale_after=5.0)
    broker = ScriptedBroker()
    poller = Poller(broker, engine, interval=1.0, clock=lambda: now[0])
    collector = FlowCollector(engine, poller, clock=lambda: now[0])
    yield Rig(broker, engine, poller, metrics_registry(collector), now)
    engine.store.close()


ARGS = {"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5}


def test_flow_state_counter_depth_and_thresholds(rig: Rig) -> None:
    rig.poll([q("orders", 11, 1100, **ARGS), q("idle", 0)], at=1000.0)
    assert rig.value("flow_sidecar_queue_flow_stopped", "orders") == 1.0
    assert rig.value("flow_sidecar_queue_flow_stopped_total", "orders") == 1.0
    assert rig.value("flow_sidecar_queue_messages", "orders") == 11.0
    assert rig.value("flow_sidecar_queue_messages_bytes", "orders") == 1100.0
    assert rig.value("flow_sidecar_queue_flow_stop_count", "orders") == 10.0
    assert rig.value("flow_sidecar_queue_flow_resume_count", "orders") == 5.0
    # only the thresholds in effect: no size ones, and none at all for "idle"
    assert rig.value("flow_sidecar_queue_flow_stop_size", "orders") is None
    assert rig.value("flow_sidecar_queue_flow_stop_count", "idle") is None
    assert rig.value("flow_sidecar_queue_flow_stopped", "idle") == 0.0
    assert rig.value("flow_sidecar_queues") == 2.0
    assert rig.value("flow_sidecar_queues_flow_stopped") == 1.0  # aggregates: always there
    assert rig.value("flow_sidecar_queues_stale") == 0.0

    rig.poll([q("orders", 7, **ARGS), q("idle", 0)], at=1001.0)  # hysteresis: still stopped
    assert rig.value("flow_sidecar_queue_flow_stopped", "orders") == 1.0
    rig.poll([q("orders", 4, **ARGS), q("idle", 0)], at=1002.0)
    assert rig.value("flow_sidecar_queue_flow_stopped", "orders") == 0.0
    rig.poll([q("orders", 11, **ARGS), q("idle", 0)], at=1003.0)
    assert rig.value("flow_sidecar_queue_flow_stopped_total", "orders") == 2.0


def test_size_thresholds_and_a_queue_without_statistics(rig: Rig) -> None:
    rig.poll([q("big", 1, 5000, **{"qpid.flow_stop_size": 4096}),
              q("new", None, None)], at=1000.0)
    assert rig.value("flow_sidecar_queue_flow_stop_size", "big") == 4096.0
    assert rig.value("flow_sidecar_queue_flow_resume_size", "big") is not None
    assert rig.value("flow_sidecar_queue_flow_stopped", "big") == 1.0
    # known but never sampled: state and staleness, no depth
    assert rig.value("flow_sidecar_queue_stale", "new") == 1.0
    assert rig.value("flow_sidecar_queue_messages", "new") is None


def test_stale_queues_and_deleted_queues(rig: Rig) -> None:
    rig.engine.on_stale = "go"
    rig.poll([q("orders", 11, **ARGS)], at=1000.0)
    assert rig.value("flow_sidecar_queue_stale", "orders") == 0.0
    rig.engine.refresh_staleness(1006.0)  # older than stale_after=5
    assert rig.value("flow_sidecar_queue_stale", "orders") == 1.0
    # what producers are told (--on-stale=go), not what the machine last measured
    assert rig.engine.entry(("/", "orders")).state.stopped
    assert rig.value("flow_sidecar_queue_flow_stopped", "orders") == 0.0
    rig.poll([], at=1007.0)
    rig.poll([], at=1008.0)  # missing from two polls: deleted, its series go away
    assert rig.value("flow_sidecar_queue_flow_stopped", "orders") is None
    assert rig.value("flow_sidecar_queues") == 0.0


def test_poller_health_counts_failures_and_ages(rig: Rig) -> None:
    assert rig.value("flow_sidecar_poll_age_seconds") == math.inf  # never polled
    assert rig.value("flow_sidecar_poll_duration_seconds") is None
    rig.poll([q("orders", 1)], at=1000.0)
    rig.poll(BrokerError("connection refused"), at=1002.0)
    rig.poll(BrokerError("connection refused"), at=1003.5)
    assert rig.value("flow_sidecar_poll_cycles_total") == 3.0
    assert rig.value("flow_sidecar_poll_errors_total") == 2.0
    assert rig.value("flow_sidecar_poll_consecutive_failures") == 2.0
    assert rig.value("flow_sidecar_poll_age_seconds") == pytest.approx(3.5)
    duration = rig.value("flow_sidecar_poll_duration_seconds")
    assert duration is not None and duration >= 0
    rig.poll([q("orders", 1)], at=1004.0)
    assert rig.value("flow_sidecar_poll_consecutive_failures") == 0.0
    assert rig.value("flow_sidecar_poll_errors_total") == 2.0
    assert rig.value("flow_sidecar_poll_age_seconds") == 0.0


class Outbox:
    def outbox_depth(self) -> int:
        return 3

    def failures_total(self) -> int:
        return 7


@pytest.mark.parametrize(("wired", "depth", "failures"), [
    (None, None, None),        # no webhooks in this app
    (Outbox(), 3.0, 7.0),
])
def test_webhook_figures_when_an_outbox_is_wired(
        rig: Rig, wired: Outbox | None, depth: float | None, failures: float | None) -> None:
    registry = metrics_registry(FlowCollector(rig.engine, rig.poller, webhook_stats=wired))
    assert registry.get_sample_value("flow_sidecar_webhook_outbox_depth") == depth
    assert registry.get_sample_value("flow_sidecar_webhook_failures_total") == failures


@pytest.mark.parametrize(("mode", "queues", "shown"), [
    ("on", 100_000, True), ("off", 1, False), ("auto", 5000, True), ("auto", 5001, False)])
def test_per_queue_series_follow_the_option(mode: str, queues: int, shown: bool) -> None:
    assert exported(mode, queues) is shown  # type: ignore[arg-type]


def test_per_queue_text_escapes_names_and_types_families(rig: Rig) -> None:
    odd = 'a"b\\c\nd é'
    rig.poll([q(odd, 3, 30, **ARGS)], at=1000.0)
    series = QueueSeries()
    for _ in range(2):  # the second scrape reuses the escaped labels
        samples = queue_samples(rig.engine, series)
        assert samples[("flow_sidecar_queue_messages", "/", odd)] == 3.0
    scrape = series.scrape()
    scrape.add(rig.engine.entries())
    types = dict(line.split()[2:] for line in scrape.text().decode().splitlines()
                 if line.startswith("# TYPE"))
    assert types["flow_sidecar_queue_flow_stopped"] == "gauge"
    assert types["flow_sidecar_queue_flow_stopped_total"] == "counter"
    rig.poll([], at=1001.0)
    rig.poll([], at=1002.0)  # gone: its labels are forgotten at the next scrape
    assert queue_samples(rig.engine, series) == {} and series.scrape().text().count(b"# TYPE") == 16


# producer classes and pacing (docs/graded-flow.md): only for the queues they concern
GRADED_ARGS = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 50}


def graded_q(name: str, messages: int) -> QueueInfo:
    return QueueInfo("/", name, messages, messages, arguments=GRADED_ARGS)


def graded_samples(engine: FlowEngine, series: QueueSeries) -> dict[tuple[str, ...], float]:
    """The per-queue samples of one scrape, keyed by name and label values."""
    scrape = series.scrape()
    scrape.add(engine.entries())
    return {(s.name, *s.labels.values()): s.value
            for family in text_string_to_metric_families(scrape.text().decode())
            for s in family.samples}


def test_class_and_pacing_series_and_their_aggregates(rig: Rig) -> None:
    engine = rig.engine
    offers = PacingOffers(ProducerRegistry(ttl=60), ProducerReports())
    series = QueueSeries(offers.offered)
    rig.poll([graded_q("orders", 10), graded_q("plain", 10)], at=1000.0)
    engine.put_settings(("/", "orders"), {}, 1000.5, classes={"bulk": 0.5, "web": 1})
    rig.poll([graded_q("orders", 60), graded_q("plain", 10)], at=1001.0)  # bulk stops at 50
    seen = graded_samples(engine, series)
    assert seen[("flow_sidecar_queue_class_stopped", "orders", "/", "bulk")] == 1.0
    assert seen[("flow_sidecar_queue_class_stopped", "orders", "/", "web")] == 0.0
    assert not [k for k in seen if k[0].endswith("class_stopped") and k[1] == "plain"]
    assert seen[("flow_sidecar_queue_paced", "orders", "/")] == 0.0
    assert not [k for k in seen if k[0].endswith("suggested_rate")]
    assert rig.value("flow_sidecar_classes_stopped") == 1.0
    assert rig.value("flow_sidecar_queues_paced") == 0.0

    rig.poll([graded_q("orders", 101), graded_q("plain", 10)], at=1002.0)  # the queue stops: paced
    seen = graded_samples(engine, series)
    assert seen[("flow_sidecar_queue_paced", "orders", "/")] == 1.0
    assert seen[("flow_sidecar_queue_paced", "plain", "/")] == 0.0
    assert seen[("flow_sidecar_queue_suggested_rate", "orders", "/")] == 0.0  # stopped
    assert ("flow_sidecar_queue_suggested_rate", "plain", "/") not in seen
    assert seen[("flow_sidecar_queue_class_stopped", "orders", "/", "web")] == 1.0
    assert rig.value("flow_sidecar_classes_stopped") == 2.0
    assert rig.value("flow_sidecar_queues_paced") == 1.0
    assert rig.value("flow_sidecar_queues_flow_stopped") == 1.0

    engine.put_settings(("/", "orders"), {}, 1002.5)  # classes removed: their series go
    assert not [k for k in graded_samples(engine, series) if k[0].endswith("class_stopped")]
    assert rig.value("flow_sidecar_classes_stopped") == 0.0


def test_a_class_name_is_escaped_like_any_label(rig: Rig) -> None:
    rig.poll([graded_q("orders", 60)], at=1000.0)
    rig.engine.put_settings(("/", "orders"), {}, 1000.5, classes={"a.b-c": 0.5})
    text = QueueSeries().scrape()
    text.add(rig.engine.entries())
    assert ('flow_sidecar_queue_class_stopped{queue="orders",vhost="/",class="a.b-c"} 1.0'
            in text.text().decode())
