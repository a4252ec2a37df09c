"""The dashboard's in-memory depth ring buffers: bounded, incremental, forgetting."""

from __future__ import annotations

import tracemalloc
from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from sidecar.model import QueueInfo
from sidecar.records import recent_depths
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


def test_a_queue_listed_twice_does_not_hide_one_gone() -> None:
    """The table is kept between polls and each ring stamped with the last poll to list it:
    a gone queue is found by count, which a queue listed twice must not even out."""
    recent = RecentDepths()
    recent.on_snapshot([q("a", 1), q("b", 2)], 1.0)
    recent.on_snapshot([q("b", 3), q("b", 4)], 2.0)
    assert not recent.holds(("/", "a"))
    assert recent.since(("/", "b")) == [(1.0, 2, 0), (2.0, 3, 0), (2.0, 4, 0)]
    recent.on_snapshot([q("a", 5), q("b", 6)], 3.0)  # back: a new ring
    assert recent.since(("/", "a")) == [(3.0, 5, 0)]


@given(size=st.integers(1, 6),
       polls=st.lists(st.tuples(st.none() | st.integers(0, 2 ** 40),
                                st.none() | st.integers(0, 2 ** 50)), max_size=30),
       after=st.none() | st.integers(-1, 31))
def test_the_ring_answers_as_a_bounded_deque_of_tuples(
        size: int, polls: list[tuple[int | None, int | None]], after: int | None) -> None:
    """The flat ring against the obvious model: a deque of tuples with maxlen."""
    recent = RecentDepths(size=size)
    model: deque[tuple[float, int, int]] = deque(maxlen=size)
    for t, (messages, nbytes) in enumerate(polls):
        recent.on_snapshot([q("a", messages, nbytes)], t + 0.5)
        if messages is not None:
            model.append((t + 0.5, messages,
                          nbytes if nbytes is not None else (model[-1][2] if model else 0)))
    expected = [s for s in model if after is None or s[0] > after]
    assert recent.since(("/", "a"), None if after is None else float(after)) == expected


def test_memory_follows_the_samples_not_python_objects() -> None:
    """120 samples of 1,000 queues: under 3.5 MB (a deque of tuples took about 9 MB)."""
    recent = RecentDepths()
    infos = [q(f"q{i}", i, 1000 * i) for i in range(1000)]
    tracemalloc.start()
    try:
        for t in range(130):
            recent.on_snapshot(infos, 1.7e9 + t + 0.25)
        # what the module holds, not what threads other tests left running allocated
        # meanwhile (in the whole suite they added 0.3 MB)
        held = sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, recent_depths.__file__)]).statistics("filename"))
    finally:
        tracemalloc.stop()
    assert len(recent.since(("/", "q7"))) == 120
    assert held < 3.5 * 2 ** 20, f"{held / 2 ** 20:.1f} MB"
