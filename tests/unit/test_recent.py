"""The dashboard's in-memory depth ring buffers: bounded, incremental, forgetting."""

from __future__ import annotations

from sidecar.model import QueueInfo
from sidecar.records.recent_depths import RecentDepths


def q(name: str, messages: int | None, nbytes: int | None = 0) -> QueueInfo:
    return QueueInfo("/", name, messages, nbytes)


def test_keeps_the_last_samples_per_queue_only() -> None:
    recent = RecentDepths(size=3)
    for t in range(5):
        recent.on_snapshot([q("a", t, 10 * t)], float(t))
    assert recent.since(("/", "a")) == [(2.0, 2, 20), (3.0, 3, 30), (4.0, 4, 40)]


def test_since_returns_only_newer_samples() -> None:
    recent = RecentDepths()
    for t in range(4):
        recent.on_snapshot([q("a", t)], float(t))
    assert recent.since(("/", "a"), after=1.0) == [(2.0, 2, 0), (3.0, 3, 0)]
    assert recent.since(("/", "a"), after=3.0) == []
    assert recent.since(("/", "unknown")) == []


def test_drops_vanished_queues_and_keeps_unsampled_ones() -> None:
    recent = RecentDepths()
    recent.on_snapshot([q("a", 1), q("b", 2)], 1.0)
    recent.on_snapshot([q("b", None, None)], 2.0)  # a deleted; b without statistics
    assert not recent.holds(("/", "a")) and recent.holds(("/", "b"))
    assert recent.since(("/", "b")) == [(1.0, 2, 0)]
