"""The forecast wired into the engine: a poll's dated statistics and live samples feed each
queue's fill rate, seconds to stop and warning; a queue whose depth stands still costs
nothing per poll; warning episodes wait for the commit."""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from api.answers import Answers
from api.store import Store
from sidecar.cluster.shared_view import parse, settings_parameter
from sidecar.flow.engine import FlowEngine, SettingsRejected
from sidecar.flow.fill_rate import WARNING_FRACTION, WARNING_HORIZON, WarningKind, WarningPolicy
from sidecar.flow.forecast import WarningNote
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.flow.vhost_settings import put_queue_defaults
from sidecar.model import LiveSample, QueueInfo
from sidecar.signals.producers import ProducerRegistry

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


def test_warning_settings_resolve_queue_over_vhost_over_startup(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.writes.startup_warning = {WARNING_HORIZON: 5.0, WARNING_FRACTION: 0.5}
    engine.apply_poll([info(100)], now=100.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.warning_policy == WarningPolicy(5.0, Fraction(1, 2))
    put_queue_defaults(engine, "/", {WARNING_FRACTION: 0.75}, now=101.0)
    assert entry.warning_policy == WarningPolicy(5.0, Fraction(3, 4))
    engine.put_settings(KEY, {WARNING_HORIZON: 60, "qpid.flow_stop_count": 120,
                              "qpid.flow_resume_count": 50}, now=102.0)
    assert entry.warning_policy == WarningPolicy(60.0, Fraction(3, 4))
    assert entry.warned  # 100 >= 0.75 x 120, judged on the settings at once
    restarted = engine_at(tmp_path)  # kill -9: the settings are in the store
    assert restarted.stored_settings(KEY) == {WARNING_HORIZON: 60, "qpid.flow_stop_count": 120,
                                              "qpid.flow_resume_count": 50}


@pytest.mark.parametrize("values, key", [
    ({WARNING_HORIZON: -1}, WARNING_HORIZON), ({WARNING_HORIZON: True}, WARNING_HORIZON),
    ({WARNING_FRACTION: 1.5}, WARNING_FRACTION), ({WARNING_FRACTION: 0}, WARNING_FRACTION)])
def test_refused_warning_settings_name_the_key_and_store_nothing(
        tmp_path: Path, values: dict[str, float], key: str) -> None:
    engine = engine_at(tmp_path)
    with pytest.raises(SettingsRejected) as refused:
        engine.put_settings(KEY, {"qpid.flow_stop_count": 10, **values}, now=1.0)
    assert [p.key for p in refused.value.problems] == [key]
    with pytest.raises(SettingsRejected):
        put_queue_defaults(engine, "/", values, now=1.0)
    assert engine.settings_keys() == [] and engine.store.load_settings() == {}


def test_a_database_from_before_gets_the_warning_columns(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE settings (vhost TEXT NOT NULL, queue TEXT NOT NULL, "
                   "stop_count INTEGER, resume_count INTEGER, stop_size INTEGER, "
                   "resume_size INTEGER, updated_at REAL NOT NULL, PRIMARY KEY (vhost, queue))")
        db.execute("INSERT INTO settings VALUES ('/', 'fills', 900, 500, NULL, NULL, 1.0)")
    store = Store(path)
    assert store.load_settings() == {KEY: {"qpid.flow_stop_count": 900,
                                           "qpid.flow_resume_count": 500}}
    store.put_settings(KEY, {"qpid.flow_stop_count": 900, WARNING_FRACTION: 0.8}, now=2.0)
    assert store.load_settings() == {KEY: {"qpid.flow_stop_count": 900, WARNING_FRACTION: 0.8}}


def test_replicas_share_warning_settings_and_refuse_bad_ones() -> None:
    good = settings_parameter(KEY, {"qpid.flow_stop_count": 900, WARNING_HORIZON: 12.5})
    bad = settings_parameter(("/", "other"), {WARNING_FRACTION: 2})
    view = parse(dict([good, bad]))
    assert view.settings == {KEY: {"qpid.flow_stop_count": 900, WARNING_HORIZON: 12.5}}
    assert len(view.problems) == 1


def test_answers_carry_the_forecast_and_a_warning_is_no_new_version(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    answers = Answers(engine, ProducerRegistry())
    engine.apply_poll([info(100)], now=100.0)
    entry = engine.entry(KEY)
    assert entry is not None
    first = json.loads(answers.flow_body(entry))
    assert (first["fillRate"], first["secondsToStop"], first["warning"]) == (None, None, False)
    engine.put_settings(KEY, {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500,
                              WARNING_FRACTION: 0.1}, now=101.0)
    version = entry.version
    # the depth moves without crossing anything: a warning (over 10 % of 900), no version
    for t in range(2, 5):
        engine.apply_poll([info(100 + 7 * t)], now=100.0 + t)
    assert entry.version == version and entry.warned
    shown = json.loads(answers.flow_body(entry))
    assert shown["warning"] is True and shown["fillRate"] == 7.0
    assert shown["secondsToStop"] == round((900 - 128) / 7, 1)
    assert json.loads(answers.full_view_body(KEY) or b"{}")["settings"][WARNING_FRACTION] == 0.1
