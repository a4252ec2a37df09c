"""Depth from statistics and live samples (pure), and the engine stepping on both over a
real SQLite store: the newest figure wins, any figure may stop a queue, and only an upper
bound of its true depth may release it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.store import Store
from sidecar.broker import LiveBatch
from sidecar.flow.depth_bound import DepthBound
from sidecar.flow.engine import FlowEngine
from sidecar.flow.hot_set import HotPolicy
from sidecar.flow.live_depth import (
    FROM_STATISTICS,
    DepthOrigin,
    DepthSource,
    LiveReading,
    bytes_per_message,
    live_can_release,
    newest_bound,
    newest_depth,
    resume_depth,
    trusted,
    unacked_bound,
)
from sidecar.flow.live_sampler import LiveSampler
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import DefaultPolicy, Level, Thresholds
from sidecar.model import Change, LiveSample, QueueInfo, QueueKey
from sidecar.signals.grant_desk import GrantDesk

LIVE = DepthOrigin(DepthSource.LIVE)
ESTIMATED = DepthOrigin(DepthSource.LIVE, bytes_estimated=True)
KEY = ("/", "orders")
COUNT_ONLY = {"qpid.flow_stop_size": 0}  # the default byte limit would watch size too
COUNT = Thresholds(count=Level(900, 500))
BOTH = Thresholds(count=Level(900, 500), size=Level(10_000, 8_000))


def stats(messages: int | None, nbytes: int | None = None, unacked: int | None = 0, *,
          consumers: int | None = 0, window: int | None = 0, queue_type: str = "classic",
          **arguments: object) -> QueueInfo:
    return QueueInfo("/", "orders", messages, nbytes, unacked=unacked, consumers=consumers,
                     unacked_limit=window, queue_type=queue_type,
                     arguments={"qpid.flow_stop_count": 5, **arguments})


# -- the pure rules ----------------------------------------------------------------------
@pytest.mark.parametrize(("info", "consumers", "expected"), [
    (stats(9, unacked=3, consumers=2, window=20), 2, 23),   # unacked + the windows
    (stats(9, unacked=3, consumers=2, window=20), 1, 23),   # one left: still a bound
    (stats(9, unacked=3, consumers=2, window=20), 3, None),  # an unlisted consumer
    (stats(9, unacked=3, consumers=2, window=None), 2, None),  # a window without limit
    (stats(9, unacked=None), None, None),                   # no unacked figure
    (stats(9, unacked=3, consumers=None, window=None), 0, None),  # consumers not listed
    (stats(9, unacked=0), None, 0),                         # no consumer, nothing held
])
def test_unacked_bound(info: QueueInfo, consumers: int | None, expected: int | None) -> None:
    assert unacked_bound(info, consumers) == expected


@pytest.mark.parametrize(("sample", "info", "expected"), [
    (LiveSample("/", "orders", 0, 1.0, 0, took=0.3), stats(5, queue_type="quorum"), False),
    (LiveSample("/", "orders", 0, 1.0, 0, took=0.01), stats(5, queue_type="quorum"), False),
    (LiveSample("/", "orders", 0, 1.0, 0, took=0.01), stats(5, unacked=5,
                                                            queue_type="quorum"), True),
    (LiveSample("/", "orders", 4, 1.0, 0, took=0.01), stats(5, queue_type="quorum"), True),
    (LiveSample("/", "orders", 0, 1.0, 0, took=0.3), stats(5), True),  # classic: no rule
])
def test_quorum_answers_that_are_no_sample(sample: LiveSample, info: QueueInfo,
                                           expected: bool) -> None:
    assert trusted(sample, info) is expected


@pytest.mark.parametrize(("info", "live", "size", "expected"), [
    # no mean size known: the real bytes of another count, flagged (issue 44)
    (stats(0, 0), LiveReading(6, 2.0), None, (Depth(6, 0), ESTIMATED)),
    (stats(2, 200), LiveReading(6, 2.0), 100.0, (Depth(6, 600), ESTIMATED)),
    (stats(6, 600, unacked=2), LiveReading(4, 2.0), 100.0, (Depth(6, 600), LIVE)),
    # small messages left, large ones stayed: the real bytes stand, never the estimate
    (stats(1000, 100_900_000), LiveReading(700, 2.0), 100_900.0,
     (Depth(700, 100_900_000), LIVE)),
    (stats(6, 600), LiveReading(0, 2.0, bound=0), 100.0, (Depth(0, 0), LIVE)),  # empty
    (stats(3, None, unacked=None), LiveReading(3, 2.0), None, (Depth(3, None), LIVE)),
])
def test_newest_depth_of_a_newer_live_reading(info: QueueInfo, live: LiveReading,
                                              size: float | None,
                                              expected: tuple[Depth, DepthOrigin]) -> None:
    merged = newest_depth(info, 1.0, live, size)
    assert merged is not None and (merged.depth, merged.origin, merged.at) == (*expected, 2.0)


def test_newest_depth_of_newer_statistics() -> None:
    merged = newest_depth(stats(9, 900), 3.0, LiveReading(0, 2.0, bound=0), 100.0)
    assert merged is not None and (merged.depth, merged.origin, merged.at) == (
        Depth(9, 900), FROM_STATISTICS, 3.0)
    assert newest_depth(stats(None), None, None, None) is None


@pytest.mark.parametrize(("live", "thresholds", "expected"), [
    (LiveReading(0, 2.0, bound=1000), COUNT, Depth(1000, None)),
    (LiveReading(0, 2.0, bound=None), COUNT, None),      # unacked without a bound
    (LiveReading(0, 2.0, bound=1000), BOTH, None),  # no live bytes, no statistics since the stop
    (LiveReading(0, 2.0, bound=0), BOTH, Depth(0, 0)),   # empty: no bytes either
])
def test_resume_depth_of_a_newer_live_reading(live: LiveReading, thresholds: Thresholds,
                                              expected: Depth | None) -> None:
    assert resume_depth(stats(900, 9_000), 1.0, live, thresholds, after=1.0) == expected


def test_resume_depth_of_newer_statistics() -> None:
    live = LiveReading(0, 2.0, bound=None)
    assert resume_depth(stats(400, 4_000), 3.0, live, BOTH) == Depth(400, 4_000)
    assert resume_depth(stats(400, None), 3.0, live, BOTH) is None  # size unknown
    assert resume_depth(stats(0, None), 3.0, live, BOTH) == Depth(0, 0)  # empty: no bytes
    assert resume_depth(stats(400, None), 3.0, live, COUNT) == Depth(400, None)
    assert newest_bound(stats(400), 3.0, live) == DepthBound(400, 3.0)
    assert newest_bound(stats(400), 1.0, live) is None
    assert newest_bound(stats(400), 1.0, LiveReading(3, 2.0, bound=7)) == DepthBound(7, 2.0)


def test_statistics_after_the_stop_resume_a_size_watched_queue_read_live_since() -> None:
    """A live sample has no bytes: statistics from after the stop have them, and a newer
    live count that is no larger does not contradict them (every queue's default
    thresholds watch size, and a stopped queue with no consumer is read live)."""
    live = LiveReading(40, 3.0, bound=40)
    assert resume_depth(stats(30, 3_000), 2.0, live, BOTH, after=1.0) == Depth(40, 3_000)
    assert resume_depth(stats(30, 3_000), 2.0, live, BOTH, after=2.0) is None  # not after
    assert resume_depth(stats(30, None), 2.0, live, BOTH, after=1.0) is None   # no bytes
    assert resume_depth(stats(30, 3_000), 2.0, live, BOTH) == Depth(40, 3_000)


@pytest.mark.parametrize(("info", "thresholds", "expected"), [
    (stats(900, unacked=0, window=100), COUNT, True),
    (stats(900, unacked=300, window=300), COUNT, False),  # the bound alone is over 500
    (stats(900, unacked=0, window=None), COUNT, False),
    (stats(900, unacked=0, window=100), BOTH, False),     # size needs statistics
    (stats(900, unacked=0, window=0), BOTH, True),  # a live 0 shows it empty: 0 bytes
    (stats(900, unacked=1, window=0), BOTH, False),      # one held: its bytes unknown
    (stats(900, unacked=0, consumers=None, window=None), BOTH, False),  # not listed
])
def test_live_can_release(info: QueueInfo, thresholds: Thresholds, expected: bool) -> None:
    assert live_can_release(info, thresholds) is expected


@given(messages=st.integers(0, 10_000), unacked=st.integers(0, 10_000),
       window=st.one_of(st.none(), st.integers(0, 10_000)),
       listed=st.integers(0, 5), answered=st.integers(0, 6), ready=st.integers(0, 10_000),
       stats_at=st.floats(0, 10), live_at=st.floats(0, 10))
def test_a_resume_figure_is_never_below_the_figure_shown(
        messages: int, unacked: int, window: int | None, listed: int, answered: int,
        ready: int, stats_at: float, live_at: float) -> None:
    """Whatever the figures, the one a queue may resume on counts at least what the
    newest figure shows: a resume never rests on less than a stop would."""
    info = stats(max(messages, unacked), unacked=unacked, consumers=listed, window=window)
    extra = unacked_bound(info, answered)
    live = LiveReading(ready, live_at, None if extra is None else ready + extra)
    shown = newest_depth(info, stats_at, live, None)
    bound = resume_depth(info, stats_at, live, COUNT)
    assert shown is not None
    assert bound is None or bound.messages >= shown.depth.messages


@pytest.mark.parametrize(("info", "previous", "expected"), [
    (stats(4, 400), None, 100.0), (stats(0, 0), 50.0, 50.0), (stats(4, None), 7.0, 7.0),
    (stats(None), None, None),
])
def test_bytes_per_message(info: QueueInfo, previous: float | None,
                           expected: float | None) -> None:
    assert bytes_per_message(info, previous) == expected


# -- the engine --------------------------------------------------------------------------
def engine_at(path: Path, lag: float = 2.0) -> FlowEngine:
    return FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0,
                      statistics_lag=lag)


def live(ready: int | None, at: float, consumers: int | None = 0) -> LiveSample:
    return LiveSample("/", "orders", ready, at, consumers)


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
    assert entry.origin == ESTIMATED and entry.sampled_at == 1.21 and entry.revision > revision
    assert entry.bound == DepthBound(6, 1.2)
    assert [c.flow_stopped for c in seen] == [True]


def test_a_prefetching_consumer_never_releases_a_full_queue(tmp_path: Path) -> None:
    """The issue's run: stop 900 / resume 500, 1,000 messages, a consumer with prefetch
    1,000 that acknowledges nothing. Live, the queue reads 0 ready; its unacknowledged
    messages are bounded by the consumer's window, so it stays stopped, counted once."""
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500, **COUNT_ONLY}
    engine.apply_poll([stats(1000, 1000, unacked=0, **args)], now=1.0, sent_at=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped
    engine.apply_poll([stats(1000, 1000, unacked=0, consumers=1, window=1000, **args)],
                      now=2.0, sent_at=2.0)
    for at in (2.1, 2.5, 3.0):
        engine.apply_live([live(0, at, consumers=1)], now=at)
        assert entry.state.stopped and entry.depth == Depth(0, 1000)  # shown, not judged
    engine.apply_poll([stats(1000, 1000, unacked=1000, consumers=1, window=1000, **args)],
                      now=9.0, sent_at=9.0)
    engine.apply_live([live(0, 9.1, consumers=1)], now=9.1)
    assert entry.state.stopped and entry.state.stopped_count == 1
    # the consumer acknowledged everything: statistics newer than the live samples say so
    engine.apply_poll([stats(0, 0, unacked=0, consumers=1, window=1000, **args)],
                      now=12.0, sent_at=12.0)
    assert not entry.state.stopped and entry.state.stopped_count == 1


def test_a_bounded_live_reading_releases_a_queue_that_watches_only_its_count(
        tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500, **COUNT_ONLY}
    engine.apply_poll([stats(1000, unacked=100, consumers=1, window=50, **args)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped
    engine.apply_live([live(360, 1.5, consumers=1)], now=1.5)  # 360 + 100 + 50 = 510
    assert entry.state.stopped
    engine.apply_live([live(340, 1.6, consumers=1)], now=1.6)  # 490
    assert not entry.state.stopped
    engine.apply_live([live(950, 1.7, consumers=1)], now=1.7)
    engine.apply_live([live(0, 1.8, consumers=2)], now=1.8)  # a consumer nobody listed
    assert entry.state.stopped


def test_estimated_bytes_never_release_a_size_stopped_queue(tmp_path: Path) -> None:
    """900 x 1 KB + 100 x 1 MB on a queue stopped at 100 MB; 300 small ones consumed: the
    estimate (700 x the mean size) is under the resume, the real total is not."""
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_size": 100_000_000, "qpid.flow_resume_size": 80_000_000,
            "qpid.flow_stop_count": 0}
    engine.apply_poll([stats(1000, 100_900_000, **args)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped
    engine.apply_live([live(700, 1.5)], now=1.5)
    assert entry.state.stopped and entry.depth == Depth(700, 100_900_000)
    engine.apply_poll([stats(700, 100_600_000, **args)], now=5.0)  # real figures, newer
    assert entry.state.stopped and entry.state.stopped_count == 1


def test_older_statistics_are_dropped_and_newer_ones_count(tmp_path: Path) -> None:
    engine = engine_at(tmp_path, lag=2.0)
    args = {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500}
    engine.apply_poll([stats(0, 0, **args)], now=1.0)
    engine.apply_live([live(950, 4.0)], now=4.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped and entry.depth == Depth(950, 0)
    engine.apply_poll([stats(100, 100, **args)], now=5.5, sent_at=5.0)  # describes 3.0
    assert entry.depth == Depth(950, 950) and entry.state.stopped  # bytes: an estimate
    engine.apply_live([live(0, 2.5)], now=5.6)  # a late live answer, older than both
    assert entry.depth == Depth(950, 950)
    engine.apply_poll([stats(100, 100, **args)], now=7.0, sent_at=6.5)  # describes 4.5
    assert entry.origin == FROM_STATISTICS and not entry.state.stopped


def test_a_quorum_queue_that_answers_0_on_a_leader_timeout_is_not_read(
        tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500, **COUNT_ONLY}
    engine.apply_poll([stats(1000, queue_type="quorum", **args)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped
    engine.apply_live([LiveSample("/", "orders", 0, 1.5, 0, took=0.26)], now=1.8)
    engine.apply_live([LiveSample("/", "orders", 0, 1.9, 0, took=0.01)], now=1.9)
    assert entry.state.stopped and entry.live is None


def test_a_gone_queue_or_an_unknown_one_changes_nothing(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([stats(3, 30)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None
    revision = entry.revision
    assert engine.apply_live([live(None, 1.1), LiveSample("/", "other", 9, 1.1)], 1.1) == []
    assert entry.depth == Depth(3, 30) and entry.revision == revision and entry.live is None


def test_credit_is_granted_against_the_upper_bound_not_the_estimate(tmp_path: Path) -> None:
    """A consumer's window may hold messages the live estimate leaves out: the grant desk
    counts the queue at its upper bound (ready + unacked + windows), never below it."""
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_count": 1000, **COUNT_ONLY}
    engine.apply_poll([stats(0, 0, unacked=0, consumers=1, window=500, **args)], now=1.0)
    engine.apply_live([live(100, 1.5, consumers=1)], now=1.5)
    entry = engine.entry(KEY)
    assert entry is not None and entry.depth is not None and entry.depth.messages == 100
    desk = GrantDesk(engine, lease=3.0, lease_max=30.0)
    destination = desk.destination(KEY)
    assert destination.depth is not None and destination.depth.messages == 600


def test_a_restarted_engine_resumes_a_stopped_queue_only_on_later_figures(
        tmp_path: Path) -> None:
    """kill -9 while stopped: the process before may have read the queue live at a moment
    newer than the first statistics the new one polls, so those cannot release it; a live
    sample after the start, or statistics describing a moment after it, can."""
    args = {"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5}
    engine = engine_at(tmp_path, lag=2.0)
    engine.apply_poll([stats(11, 11, **args)], now=1.0, sent_at=1.0)
    engine.apply_live([live(11, 5.0)], now=5.0)  # the last thing this process saw
    before = engine.entry(KEY)
    assert before is not None and before.state.stopped
    again = engine_at(tmp_path, lag=2.0)  # the same store: a restart
    again.apply_poll([stats(4, 4, **args)], now=5.5, sent_at=5.4)  # old figures: 3.4
    entry = again.entry(KEY)
    assert entry is not None and entry.state.stopped
    again.apply_poll([stats(4, 4, **args)], now=8.0, sent_at=7.9)  # 5.9: after the start
    assert not entry.state.stopped and entry.state.stopped_count == 1


def test_a_refused_live_read_keeps_the_moment_of_the_last_one(tmp_path: Path) -> None:
    """A live read that cannot be had (refused, or the queue just deleted) leaves the last
    live reading in place: older statistics must not become the newest figure by it."""
    args = {"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5, **COUNT_ONLY}
    engine = engine_at(tmp_path, lag=2.0)
    engine.apply_poll([stats(0, 0, **args)], now=1.0, sent_at=1.0)
    engine.apply_live([live(11, 4.0)], now=4.0)
    engine.apply_live([live(None, 4.5)], now=4.5)
    engine.apply_poll([stats(4, 4, **args)], now=5.0, sent_at=5.0)  # describes 3.0
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped


# -- issue 44: a shown figure is never below what is known; an empty queue resumes live ---
def test_a_burst_into_a_queue_never_seen_with_messages_shows_no_real_zero_bytes(
        tmp_path: Path) -> None:
    """The issue's newcomer: the statistics saw the queue empty (0 messages, 0 bytes), so
    no mean size is known; a live sample reads the burst. Its bytes are not the broker's
    figure for 150 messages: never shown as real (`bytesEstimated: false`)."""
    engine = engine_at(tmp_path)
    engine.apply_poll([stats(0, 0, **{"qpid.flow_stop_count": 100})], now=1.0)
    engine.apply_live([live(150, 1.5)], now=1.5)
    entry = engine.entry(KEY)
    assert entry is not None and entry.depth is not None and entry.depth.messages == 150
    assert entry.origin.bytes_estimated or entry.depth.bytes is None


def test_bytes_carried_from_an_emptier_poll_are_an_estimate(tmp_path: Path) -> None:
    """A poll with a count and no bytes (a Prometheus poll between two byte reads) shows
    the last bytes meanwhile; of another count, they are flagged as an estimate."""
    engine = engine_at(tmp_path)
    engine.apply_poll([stats(0, 0)], now=1.0)
    engine.apply_poll([stats(150, None)], now=2.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.depth is not None and entry.depth.messages == 150
    assert entry.origin.bytes_estimated or entry.depth.bytes is None


class ScriptedQueue:
    """A `LiveDepthSource` over one queue whose ready and consumer counts a test sets."""

    def __init__(self, ready: int, consumers: int = 0) -> None:
        self.ready, self.consumers = ready, consumers
        self.asked: list[QueueKey] = []

    def sample(self, keys: Sequence[QueueKey]) -> LiveBatch:
        self.asked += keys
        return LiveBatch([LiveSample(*key, self.ready, 5.0, self.consumers) for key in keys])

    def close(self) -> None:
        pass


def test_a_purged_queue_with_the_default_size_thresholds_resumes_on_a_live_read(
        tmp_path: Path) -> None:
    """The issue's run: count 100/50 and the default size thresholds (the default queue
    limit's 80 % / 70 %), 150 messages, no consumer: stopped. Purged, a live read of ready
    0 with no consumer bounds it at 0 messages and 0 bytes: the sampler reads it (its size
    is watched, but a live read can show it empty) and the engine resumes it, without
    waiting for statistics newer than the purge."""
    engine = engine_at(tmp_path)
    args = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 50}
    engine.apply_poll([stats(150, 150_000, **args)], now=1.0, sent_at=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.state.stopped
    assert entry.resolution.thresholds.size is not None  # the default limit watches size
    source = ScriptedQueue(ready=0)
    sampler = LiveSampler(source, engine, HotPolicy(0.2, 10.0, 0.05), budget=100,
                          idle_budget=10, clock=lambda: 5.0)
    sampler.rescan()
    asyncio.run(sampler.round(0.05))
    assert source.asked == [KEY]
    assert not entry.state.stopped and entry.depth == Depth(0, 0)
