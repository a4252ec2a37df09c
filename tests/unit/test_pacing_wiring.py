"""Pacing wired: the engine steps each queue's pacing with what it is told, and
`PacingOffers` offers each registered producer its share, over a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.pacing import drain_rate, total_rate
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.signals.pacing_offers import PacingOffers
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.producers import ProducerRegistry

KEY = ("/", "orders")
T0 = 1_000_000.0


def info(messages: int) -> QueueInfo:
    return QueueInfo("/", "orders", messages, messages * 100, arguments={
        "qpid.flow_stop_count": 1000, "qpid.flow_resume_count": 800,
        "qpid.flow_stop_size": 0})


class Queue:
    """An engine polled every second, two producers that report and ask."""

    def __init__(self, path: Path) -> None:
        self.engine = FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0,
                                 statistics_lag=0.0)  # the figures given are of now
        self.registry, self.reports = ProducerRegistry(ttl=60), ProducerReports()
        self.offers = PacingOffers(self.registry, self.reports)
        self.sent = {"p1": 0, "p2": 0}
        self.now = T0

    @property
    def entry(self) -> QueueEntry:
        found = self.engine.entry(KEY)
        assert found is not None
        return found

    def second(self, depth: int, rates: dict[str, int]) -> None:
        self.now += 1
        self.engine.apply_poll([info(depth)], now=self.now)
        for producer, rate in rates.items():
            self.sent[producer] += rate
            self.reports.record(KEY, producer, self.sent[producer], self.now)
            self.registry.seen(KEY, producer, 10, self.entry.told_stopped, self.now)

    def filled_until_warned(self) -> int:
        """From 700, 60/s published and 40/s taken (+20/s) until the queue is warned; the
        depth then."""
        depth = 700
        seconds = 0
        self.second(depth, {"p1": 40, "p2": 20})
        while not self.entry.warned:
            assert seconds < 60, "never warned"
            depth, seconds = depth + 20, seconds + 1
            self.second(depth, {"p1": 40, "p2": 20})
        return depth

    def offered(self, producer: str) -> float | None:
        return self.offers.rate(self.entry, producer, self.now)


def test_a_queue_that_stops_is_paced_offered_zero_then_its_drain_once_it_resumes(
        tmp_path: Path) -> None:
    queue = Queue(tmp_path)
    for t in range(10):  # far from the stop: not paced, no rate for anyone
        queue.second(100 + 10 * t, {"p1": 40, "p2": 20})
    assert not queue.entry.pacing.engaged and queue.offered("p1") is None
    assert queue.offers.offered(queue.entry) is None
    depth = 190
    while not queue.entry.told_stopped:  # 60/s published, 40/s taken: +20/s
        depth += 20
        queue.second(depth, {"p1": 40, "p2": 20})
    assert queue.entry.pacing.engaged
    assert (queue.offered("p1"), queue.offered("p2")) == (0.0, 0.0)
    assert queue.offers.offered(queue.entry) == 0.0
    assert queue.offered("stranger") == 0.0  # stopped: a rate never releases anyone
    while queue.entry.told_stopped:  # stopped, nothing published: -40/s
        depth -= 40
        queue.second(depth, {"p1": 0, "p2": 0})
    entry = queue.entry
    assert entry.pacing.engaged and entry.fill is not None and entry.depth is not None
    offered = {p: queue.offered(p) for p in ("p1", "p2")}
    drain = drain_rate(entry.fill, queue.reports.published(KEY, entry.fill.since,
                                                           entry.fill.at))
    assert 30 < drain < 50  # 40/s taken; the fit's window spans the stop and the drain
    assert sum(r or 0 for r in offered.values()) == pytest.approx(
        total_rate(drain, entry.depth, entry.resolution.thresholds))
    assert all(r is not None and r > 0 for r in offered.values())
    assert queue.offers.offered(entry) == pytest.approx(sum(r or 0 for r in offered.values()))
    assert queue.offered("stranger") is None  # not registered: no share
    for _ in range(45):  # far under every resume for 30 s: pacing ends
        queue.second(100, {"p1": 5, "p2": 5})
    assert not queue.entry.pacing.engaged and queue.offered("p1") is None


def test_a_paced_queue_its_producers_hold_level_keeps_its_drain(tmp_path: Path) -> None:
    """Figures that stay equal are not kept (`forecast`): the fill's window then ends long
    ago, and the drain must come from the reports up to the newest equal figure, not from
    an empty window (which offered 0 to producers sending exactly what was taken)."""
    queue = Queue(tmp_path)
    depth = queue.filled_until_warned()
    for _ in range(200):  # then exactly what the consumers take, for longer than the
        # reports of the last fit are kept: the depth stays
        queue.second(depth, {"p1": 20, "p2": 20})
    entry = queue.entry
    assert entry.pacing.engaged and entry.flat and entry.fill is not None
    assert entry.fill.at < queue.now - 30  # the fit's last figure: before the level
    total = sum(queue.offered(p) or 0 for p in ("p1", "p2"))
    assert total == pytest.approx(total_rate(40.0, entry.depth, entry.resolution.thresholds),
                                  rel=0.1)


def test_a_producer_another_replica_heard_takes_its_share_here(tmp_path: Path) -> None:
    """Replicas share their producers' reports (`shared_reports`): a replica that never
    registered a reporting producer still counts it, so that the replicas together offer
    the one total, not each its own producers the whole of it."""
    queue = Queue(tmp_path)
    queue.filled_until_warned()
    only_p1 = ProducerRegistry(ttl=60)  # p2 asks another replica; its reports reach here
    only_p1.seen(KEY, "p1", 10, False, queue.now)
    here = PacingOffers(only_p1, queue.reports)
    both = {p: queue.offered(p) for p in ("p1", "p2")}
    assert {p: here.rate(queue.entry, p, queue.now) for p in ("p1", "p2")} == both
    assert all(r is not None and r > 0 for r in both.values())


def test_pacing_ends_when_the_adapter_keeps_the_figures(tmp_path: Path) -> None:
    """An adapter hands back the same `QueueInfo` for a queue whose figures did not change
    (the Prometheus one does): the engine only dates them again (`FigureIntake.redate`),
    and a paced queue's pacing must still step to its end."""
    queue = Queue(tmp_path)
    queue.filled_until_warned()
    queue.second(100, {"p1": 5, "p2": 5})  # drained at once
    assert queue.entry.pacing.engaged
    kept = queue.entry.info
    for _ in range(60):  # far under every resume for a minute, the same figures each poll
        queue.now += 1
        queue.engine.apply_poll([kept], now=queue.now)
    assert not queue.entry.pacing.engaged
