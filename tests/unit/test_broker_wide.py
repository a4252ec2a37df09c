"""Broker-wide flow control in the engine, over the real SQLite store: vhost quotas with
their hysteresis, counters and MST lines across restarts, per-vhost default thresholds,
broker alarms, and one transaction per vhost write."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow import vhost_settings
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.engine import FlowEngine, SettingsRejected, StoreUnavailable
from sidecar.flow.stop_reasons import StoppedBy
from sidecar.flow.thresholds import DefaultPolicy, Level, Source
from sidecar.model import Change, LiveSample, QueueInfo

A, B, OTHER = ("/", "a"), ("/", "b"), ("other", "c")
QUOTA = {"overfullSize": 1000, "underfullSize": 600}


def q(key: tuple[str, str], nbytes: int, messages: int = 1, **arguments: object) -> QueueInfo:
    return QueueInfo(key[0], key[1], messages, nbytes, arguments=arguments)


def engine_at(path: Path, **kw: object) -> FlowEngine:
    return FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(),
                      **{"stale_after": 10.0, **kw})  # type: ignore[arg-type]


def by(engine: FlowEngine, key: tuple[str, str]) -> list[str]:
    entry = engine.entry(key)
    assert entry is not None
    return [str(r.by) for r in entry.stop_reasons]


def test_vhost_quota_stops_every_queue_of_its_vhost_with_hysteresis(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "flow_sidecar")
    engine = engine_at(tmp_path)
    changes: list[Change] = []
    engine.listeners.append(changes.append)
    engine.apply_poll([q(A, 400), q(B, 500), q(OTHER, 5000)], now=1.0)
    vhost_settings.put_quota(engine, "/", QUOTA, now=2.0)  # 900 of 1000: not yet
    assert not engine.entry(A).told_stopped
    engine.apply_poll([q(A, 400), q(B, 601), q(OTHER, 5000)], now=3.0)  # 1001 > 1000
    for key in (A, B):
        entry = engine.entry(key)
        assert entry.told_stopped and by(engine, key) == ["vhost-quota"]
        assert not entry.state.stopped and entry.state.stopped_count == 0  # not its own
    assert not engine.entry(OTHER).told_stopped  # another vhost
    assert {(c.queue, c.flow_stopped, c.stopped_by) for c in changes} == {
        ("a", True, ("vhost-quota",)), ("b", True, ("vhost-quota",))}
    assert "MST-1008" in changes[0].reason
    assert "[vh(/)/ms(queues)] MST-1008 : Store overfull, flow control will be enforced" in (
        caplog.text)
    engine.apply_poll([q(A, 300), q(B, 300), q(OTHER, 5000)], now=4.0)  # 600: not < 600
    assert engine.entry(A).told_stopped
    engine.apply_poll([q(A, 300), q(B, 299), q(OTHER, 5000)], now=5.0)
    assert not engine.entry(A).told_stopped and by(engine, A) == []
    assert "MST-1009 : Store overfull condition cleared" in caplog.text
    assert engine.broker_wide.state("/").stopped_count == 1


def test_quota_state_and_counter_survive_a_restart(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([q(A, 2000)], now=1.0)
    vhost_settings.put_quota(engine, "/", QUOTA, now=2.0)  # applies at once: overfull
    assert engine.entry(A).told_stopped

    again = engine_at(tmp_path)  # kill -9 and start: same database, fresh memory
    assert again.broker_wide.quota("/") == QUOTA
    state = again.broker_wide.state("/")
    assert state.stopped and state.stopped_count == 1 and state.since == 2.0
    again.apply_poll([q(A, 800)], now=3.0)  # between underfull and overfull: holds
    assert again.entry(A).told_stopped and by(again, A) == ["vhost-quota"]


def test_own_state_and_quota_both_named_and_count_only_own(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    vhost_settings.put_quota(engine, "/", QUOTA, now=0.0)
    engine.apply_poll([q(A, 2000, 11, **{"qpid.flow_stop_count": 10})], now=1.0)
    entry = engine.entry(A)
    assert by(engine, A) == ["queue", "vhost-quota"] and entry.state.stopped_count == 1
    engine.apply_poll([q(A, 2000, 1, **{"qpid.flow_stop_count": 10})], now=2.0)
    assert by(engine, A) == ["vhost-quota"] and engine.entry(A).told_stopped


def test_deleting_an_overfull_quota_resumes(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([q(A, 2000)], now=1.0)
    vhost_settings.put_quota(engine, "/", QUOTA, now=2.0)
    version = engine.entry(A).version
    assert vhost_settings.delete(engine, vhost_settings.QUOTA, "/", now=3.0)
    assert not engine.entry(A).told_stopped and engine.entry(A).version > version
    assert not vhost_settings.delete(engine, vhost_settings.QUOTA, "/", now=4.0)
    assert engine_at(tmp_path).broker_wide.quota("/") is None


def test_refused_quota_stores_nothing(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    with pytest.raises(SettingsRejected) as refused:
        vhost_settings.put_quota(engine, "/", {"overfullSize": 5, "underfullSize": 6}, 1.0)
    assert refused.value.problems[0].key == "underfullSize"
    assert engine.broker_wide.quota("/") is None and engine.store.load_vhost_settings(
        "quota") == {}


def test_a_quota_write_that_cannot_commit_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engine_at(tmp_path)
    heard: list[Change] = []
    engine.listeners.append(heard.append)
    engine.apply_poll([q(A, 2000)], now=1.0)
    version = engine.entry(A).version

    def full(*_: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(engine.store, "save_vhost_states", full)
    with pytest.raises(StoreUnavailable):
        vhost_settings.put_quota(engine, "/", QUOTA, now=2.0)
    entry = engine.entry(A)
    assert not entry.told_stopped and entry.version == version and heard == []
    assert engine.broker_wide.quota("/") is None and not engine.broker_wide.state("/").stopped
    monkeypatch.undo()
    engine.apply_poll([q(A, 2000)], now=3.0)  # nothing was left half done for later
    assert not engine.entry(A).told_stopped and heard == []


def test_vhost_defaults_rank_between_arguments_and_global_defaults(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    defaults = {"qpid.flow_stop_size": 5000, "qpid.flow_resume_size": 4000}
    vhost_settings.put_queue_defaults(engine, "/", defaults, now=0.0)
    engine.apply_poll([q(A, 10), q(B, 10, **{"qpid.flow_stop_size": 900}),
                       QueueInfo("/", "ring", 1, 10, arguments={"x-max-length": 5}),
                       q(OTHER, 10)], now=1.0)
    res = engine.entry(A).resolution
    assert res.size_source is Source.VHOST and res.thresholds.size == Level(5000, 4000)
    assert engine.entry(B).resolution.size_source is Source.ARGUMENTS
    assert engine.entry(("/", "ring")).resolution.size_source is Source.NONE  # RING
    assert engine.entry(OTHER).resolution.size_source is Source.DEFAULT
    engine.put_settings(A, {"qpid.flow_stop_size": 100}, now=2.0)
    assert engine.entry(A).resolution.size_source is Source.API
    assert vhost_settings.delete(engine, vhost_settings.DEFAULTS, "/", now=3.0)
    assert engine.entry(("/", "ring")).resolution.size_source is Source.NONE
    assert engine.entry(B).resolution.size_source is Source.ARGUMENTS


def test_vhost_defaults_above_a_queue_maximum_fall_back_for_that_queue(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([q(A, 10, **{"x-max-length-bytes": 1000,
                                   "x-overflow": "reject-publish"})], now=1.0)
    vhost_settings.put_queue_defaults(engine, "/", {"qpid.flow_stop_size": 5000}, now=2.0)
    res = engine.entry(A).resolution
    assert res.size_source is Source.DEFAULT and res.thresholds.size == Level(800, 700)
    assert any(e.startswith("vhost: qpid.flow_stop_size=5000 must be less than")
               for e in res.errors), res.errors
    with pytest.raises(SettingsRejected):
        vhost_settings.put_queue_defaults(engine, "/", {"qpid.flow_stop_size": -1}, now=3.0)


def test_broker_alarm_stops_every_queue_until_cleared(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    changes: list[Change] = []
    engine.listeners.append(changes.append)
    wide = engine.broker_wide
    wide.read_alarms({"rabbit@a": NodeStatus(False, False)}, now=0.0)
    engine.apply_poll([q(A, 1), q(OTHER, 1)], now=0.0)
    assert wide.read_alarms({"rabbit@a": NodeStatus(False, True)}, now=1.0)
    engine.apply_poll([q(A, 1), q(OTHER, 1)], now=1.0)
    for key in (A, OTHER):
        entry = engine.entry(key)
        assert entry.told_stopped and by(engine, key) == ["broker-alarm"]
        assert "disk alarm on node rabbit@a" in entry.stop_reasons[0].detail
    assert {c.reason for c in changes} == {entry.stop_reasons[0].detail}
    # a failed read, or a node that says nothing, changes nothing
    assert not wide.read_alarms(None, now=2.0, error="HTTP 500")
    assert not wide.read_alarms({"rabbit@a": NodeStatus(None, None)}, now=3.0)
    engine.apply_poll([q(A, 1), q(OTHER, 1)], now=3.0)
    assert engine.entry(A).told_stopped and wide.alarm_error is None
    assert wide.read_alarms({"rabbit@a": NodeStatus(False, False)}, now=4.0)
    engine.apply_poll([q(A, 1), q(OTHER, 1)], now=4.0)
    assert not engine.entry(A).told_stopped and by(engine, A) == []
    assert changes[-1].reason.startswith("cleared: disk alarm")
    assert [c.stopped_by for c in changes if c.queue == "a"] == [
        (StoppedBy.BROKER_ALARM,), ()]


def test_live_byte_estimates_never_clear_a_vhost_quota(tmp_path: Path) -> None:
    """A live sample has no bytes; its estimate (messages x the mean size) may be below
    the real total (the large messages stayed), so the vhost total keeps the statistics'
    real bytes until they fall: the quota clears on real figures only."""
    engine = engine_at(tmp_path)
    vhost_settings.put_quota(engine, "/", QUOTA, now=0.5)
    big = QueueInfo("/", "a", 10, 1001, unacked=0, consumers=0, unacked_limit=0)
    engine.apply_poll([big], now=1.0)
    assert engine.entry(A).told_stopped and by(engine, A) == ["vhost-quota"]
    engine.apply_live([LiveSample("/", "a", 1, 1.5, 0)], now=1.5)  # estimate: 100 bytes
    engine.apply_poll([big], now=2.0)  # the statistics still say 1,001 real bytes
    assert engine.entry(A).told_stopped and by(engine, A) == ["vhost-quota"]
    engine.apply_poll([replace(big, messages=1, bytes=100)], now=3.0)
    assert not engine.entry(A).told_stopped


@pytest.mark.parametrize(("on_stale", "stopped"), [("hold", True), ("stop", True),
                                                    ("go", False)])
def test_alarms_unread_past_stale_after_are_what_on_stale_says(
        tmp_path: Path, on_stale: str, stopped: bool) -> None:
    """A broker that stops reporting its alarms (4.x with management statistics denied,
    no Prometheus endpoint) is a stale source: within --stale-after the last known alarms
    hold; after it, --on-stale decides, as for a queue without a fresh depth."""
    engine = engine_at(tmp_path, on_stale=on_stale)
    wide = engine.broker_wide
    wide.read_alarms({"rabbit@a": NodeStatus(False, False)}, now=0.0)
    engine.apply_poll([q(A, 1)], now=0.0)
    assert not wide.read_alarms(None, now=1.0, error="no alarm flags")
    engine.apply_poll([q(A, 1)], now=1.0)
    assert not engine.entry(A).told_stopped  # within --stale-after (10 s): as last known
    wide.read_alarms(None, now=12.0, error="no alarm flags")
    engine.apply_poll([q(A, 1)], now=12.0)
    assert engine.entry(A).told_stopped is (on_stale == "stop")
    wide.read_alarms({"rabbit@a": NodeStatus(False, True)}, now=13.0)  # read again: raised
    engine.apply_poll([q(A, 1)], now=13.0)
    assert engine.entry(A).told_stopped
    wide.read_alarms(None, now=14.0, error="no alarm flags")
    wide.read_alarms(None, now=30.0, error="no alarm flags")
    engine.apply_poll([q(A, 1)], now=30.0)
    assert engine.entry(A).told_stopped is stopped  # go: the last alarm no longer counts
