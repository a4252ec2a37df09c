"""The forecast wired into the engine: a poll's dated statistics and live samples feed each
queue's fill rate, seconds to stop and warning; a queue whose depth stands still costs
nothing per poll; warning episodes wait for the commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.fill_rate import WarningKind
from sidecar.flow.forecast import WarningNote
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import LiveSample, QueueInfo

KEY = ("/", "fills")


def info(messages: int, nbytes: int | None = None) -> QueueInfo:
    return QueueInfo("/", "fills", messages, 10 * messages if nbytes is None else nbytes,
                     unacked=0, arguments={"qpid.flow_stop_count": 900,
                                           "qpid.flow_resume_count": 500})


def engine_at(path: Path) -> FlowEngine:
    return FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(), stale_after=30.0)


def test_a_steady_fill_gives_its_rate_seconds_to_stop_and_a_warning(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    notes: list[WarningNote] = []
    engine.journal.warning_listeners.append(notes.append)
    for t in range(4):  # 10 messages/s from 570: at 600 the stop is 30 s away
        engine.apply_poll([info(570 + 10 * t)], now=100.0 + t)
    entry = engine.entry(KEY)
    assert entry is not None and entry.fill is not None
    assert entry.fill.messages == pytest.approx(10) and entry.fill.bytes == pytest.approx(100)
    assert entry.seconds_to_stop == pytest.approx(30) and entry.warned
    assert not entry.state.stopped  # a warning never stops anyone
    assert [n.event.kind for n in notes] == [WarningKind.STARTED]


def test_an_unchanged_queue_costs_nothing_once_its_window_is_flat(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    same = info(100)
    for t in range(30):  # the adapter keeps the very QueueInfo: redates only
        engine.apply_poll([same], now=100.0 + t)
    entry = engine.entry(KEY)
    assert entry is not None and entry.flat and entry.fill is not None
    estimator, fill = entry.estimator, entry.fill
    engine.apply_poll([same], now=130.0)
    assert entry.estimator is estimator and entry.fill is fill  # no object made
    assert entry.flat_until == entry.statistics_at and fill.messages == 0
    assert not entry.warned and entry.seconds_to_stop is None
    # it starts to fill: the flat stretch enters as its newest moment, a rate at once
    engine.apply_poll([info(120)], now=131.0)
    assert entry.fill is not None and entry.fill.messages > 0
    assert [f.at for f in entry.estimator.figures] == [111.0, 130.0, 131.0]


def test_live_samples_feed_the_count_at_their_moment(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(100)], now=100.0)
    for t in range(1, 5):
        engine.apply_live([LiveSample(*KEY, 100 + 20 * t, at=100.0 + t)], now=100.0 + t)
    entry = engine.entry(KEY)
    assert entry is not None and entry.fill is not None
    assert entry.fill.messages == pytest.approx(20) and entry.fill.bytes is None


def test_new_thresholds_judge_the_warning_again(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(700)], now=100.0)
    entry = engine.entry(KEY)
    assert entry is not None and not entry.warned
    engine.put_settings(KEY, {"qpid.flow_stop_count": 750, "qpid.flow_resume_count": 500},
                        now=101.0)
    assert entry.warned  # 700 >= 0.9 x 750
