"""Depth from statistics and live samples (pure), and the engine stepping on both over a
real SQLite store: the newer source wins, so statistics older than a live sample never
flip a state back."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.live_depth import (
    FROM_STATISTICS,
    DepthOrigin,
    DepthSource,
    LiveReading,
    bytes_per_message,
    live_depth,
    merged_depth,
)
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import Change, LiveSample, QueueInfo

LIVE = DepthOrigin(DepthSource.LIVE)
ESTIMATED = DepthOrigin(DepthSource.LIVE, bytes_estimated=True)
KEY = ("/", "orders")


def stats(messages: int | None, nbytes: int | None = None, unacked: int | None = 0,
          **arguments: object) -> QueueInfo:
    return QueueInfo("/", "orders", messages, nbytes, unacked=unacked,
                     arguments={"qpid.flow_stop_count": 5, **arguments})


@pytest.mark.parametrize(("ready", "info", "size", "expected"), [
    (6, stats(0, 0), None, (Depth(6, 0), LIVE)),          # no size known yet
    (6, stats(2, 200), 100.0, (Depth(6, 600), ESTIMATED)),
    (4, stats(6, 600, unacked=2), 100.0, (Depth(6, 600), LIVE)),  # = statistics: exact
    (3, stats(6, 700, unacked=2), 100.0, (Depth(5, 500), ESTIMATED)),  # + unacked
    (3, stats(None, None, unacked=None), None, (Depth(3, None), LIVE)),  # bytes unknown, never 0
])
def test_live_depth(ready: int, info: QueueInfo, size: float | None,
                    expected: tuple[Depth, DepthOrigin]) -> None:
    assert live_depth(ready, info, size) == expected


@pytest.mark.parametrize(("info", "previous", "expected"), [
    (stats(4, 400), None, 100.0), (stats(0, 0), 50.0, 50.0), (stats(4, None), 7.0, 7.0),
    (stats(None), None, None),
])
def test_bytes_per_message(info: QueueInfo, previous: float | None,
                           expected: float | None) -> None:
    assert bytes_per_message(info, previous) == expected


def test_the_newer_source_wins() -> None:
    info = stats(9, 900)
    live = LiveReading(ready=0, at=10.0)
    newer_live = merged_depth(info, live, 100.0, statistics_as_of=9.0, polled_at=11.0)
    assert newer_live is not None
    assert (newer_live.depth, newer_live.origin, newer_live.at) == (
        Depth(0, 0), ESTIMATED, 10.0)
    newer_stats = merged_depth(info, live, 100.0, statistics_as_of=10.5, polled_at=12.5)
    assert newer_stats is not None
    assert (newer_stats.depth, newer_stats.origin, newer_stats.at) == (
        Depth(9, 900), FROM_STATISTICS, 12.5)
    assert merged_depth(stats(None), None, None, 0.0, 1.0) is None
    held = merged_depth(info, live, 100.0, statistics_as_of=10.5, polled_at=12.5,
                        hold=lambda depth: depth.messages > 5)
    assert held is None  # the statistics would flip the state: keep the depth there is


# -- the engine --------------------------------------------------------------------------
def engine_at(path: Path, lag: float = 2.0) -> FlowEngine:
    return FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0,
                      statistics_lag=lag)


def live(ready: int | None, at: float) -> LiveSample:
    return LiveSample("/", "orders", ready, at)


def test_a_live_sample_steps_the_machine_and_moves_the_revision(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    seen: list[Change] = []
    engine.listeners.append(seen.append)
    engine.apply_poll([stats(0, 0)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.origin == FROM_STATISTICS
    revision = entry.revision
    engine.apply_live([live(6, 1.2)], now=1.21)
    assert entry.state.stopped and entry.told_stopped and entry.depth == Depth(6, 0)
    assert entry.origin == LIVE and entry.sampled_at == 1.2 and entry.revision > revision
    assert [c.flow_stopped for c in seen] == [True]


def test_older_statistics_do_not_undo_a_live_sample(tmp_path: Path) -> None:
    """The broker's statistics still show 6 after a live sample saw the queue emptied:
    the state stays as the live sample left it, and the unacked count is refreshed."""
    engine = engine_at(tmp_path, lag=2.0)
    engine.apply_poll([stats(0, 0)], now=1.0)
    engine.apply_live([live(6, 1.1)], now=1.1)
    engine.apply_live([live(0, 1.5)], now=1.5)
    entry = engine.entry(KEY)
    assert entry is not None and not entry.state.stopped and entry.state.stopped_count == 1
    engine.apply_poll([stats(6, 600, unacked=1)], now=2.0)  # figures from before 1.5
    assert not entry.state.stopped and entry.depth == Depth(1, 100)
    assert entry.origin == ESTIMATED and entry.sampled_at == 1.5
    engine.apply_poll([stats(0, 0)], now=4.0)  # the live sample is older than 4 - 2 now
    assert entry.origin == FROM_STATISTICS and entry.depth == Depth(0, 0)


def test_statistics_take_over_when_live_samples_stop(tmp_path: Path) -> None:
    engine = engine_at(tmp_path, lag=2.0)
    engine.apply_poll([stats(0, 0)], now=1.0)
    engine.apply_live([live(3, 1.1)], now=1.1)
    engine.apply_poll([stats(7, 70)], now=3.5)  # newer than the live sample: it counts
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped and entry.depth == Depth(7, 70)


def test_a_gone_queue_or_an_unknown_one_changes_nothing(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([stats(3, 30)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None
    revision = entry.revision
    assert engine.apply_live([live(None, 1.1), LiveSample("/", "other", 9, 1.1)], 1.1) == []
    assert entry.depth == Depth(3, 30) and entry.revision == revision and entry.live is None


@pytest.mark.parametrize(("reachable", "stopped"), [(True, False), (False, True)])
def test_statistics_that_would_flip_a_live_state_wait_for_a_live_sample(
        tmp_path: Path, reachable: bool, stopped: bool) -> None:
    """At 5 s statistics a figure can show up 10 s after the moment it describes, later
    than --broker-stats-lag says: while live samples can be had, a figure that would flip
    the state of a queue read live waits for the next live sample, which settles it."""
    engine = engine_at(tmp_path, lag=2.0)
    engine.live_reachable = reachable
    engine.apply_poll([stats(0, 0)], now=1.0)
    engine.apply_live([live(0, 1.5)], now=1.5)
    engine.apply_poll([stats(6, 60)], now=10.0)  # a burst the live samples never saw
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped is stopped
    if reachable:
        assert entry.depth == Depth(0, 0) and entry.origin == LIVE
        engine.apply_live([live(0, 10.05)], now=10.05)  # the next round: still empty
        assert not entry.state.stopped and entry.state.stopped_count == 0
        engine.apply_live([live(None, 10.1)], now=10.1)  # then refused: statistics count
        engine.apply_poll([stats(6, 60)], now=11.0)
        assert entry.state.stopped
