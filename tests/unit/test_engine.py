"""The engine over a real SQLite store, fed QueueInfo records as a poll would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine, SettingsRejected
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import DefaultPolicy, Level, Source
from sidecar.model import Change, QueueInfo

KEY = ("/", "orders")


def info(messages: int | None, nbytes: int = 0, **arguments: object) -> QueueInfo:
    return QueueInfo("/", "orders", messages, nbytes,
                     arguments={"x-max-length": 1000, "x-overflow": "reject-publish",
                                **arguments})


def engine_at(path: Path, **kw: object) -> FlowEngine:
    return FlowEngine(Store(path / "db.sqlite3"), DefaultPolicy(),
                      **{"stale_after": 10.0, **kw})  # type: ignore[arg-type]


def test_defaults_apply_and_counter_survives_restart(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    seen: list[Change] = []
    engine.listeners.append(seen.append)
    engine.apply_poll([info(801)], now=1.0)
    entry = engine.entry(KEY)
    assert entry.resolution.thresholds.count == Level(800, 700)
    assert entry.told_stopped and entry.state.stopped_count == 1
    assert [c.flow_stopped for c in seen] == [True]

    again = engine_at(tmp_path)  # a restart: same database, fresh memory
    again.apply_poll([info(750)], now=2.0)  # between resume and stop: hysteresis holds
    entry = again.entry(KEY)
    assert entry.state.stopped and entry.state.stopped_count == 1
    assert entry.version >= engine.entry(KEY).version
    again.apply_poll([info(699)], now=3.0)
    assert not again.entry(KEY).state.stopped


def test_refused_settings_store_nothing(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(0)], now=1.0)
    with pytest.raises(SettingsRejected) as refused:
        engine.put_settings(KEY, {"qpid.flow_stop_count": 1001}, now=2.0)
    assert refused.value.problems[0].key == "qpid.flow_stop_count"
    assert engine.settings_keys() == [] and engine.store.load_settings() == {}


def test_settings_apply_at_once_against_last_depth(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(600)], now=1.0)
    assert not engine.entry(KEY).state.stopped
    engine.put_settings(KEY, {"qpid.flow_stop_count": 500, "qpid.flow_resume_count": 100}, 2.0)
    entry = engine.entry(KEY)
    assert entry.state.stopped and entry.resolution.count_source is Source.API
    assert engine_at(tmp_path).stored_settings(KEY) == {"qpid.flow_stop_count": 500,
                                                        "qpid.flow_resume_count": 100}
    assert engine.delete_settings(KEY, 3.0)
    assert not engine.entry(KEY).state.stopped  # default 800/700: 600 is under resume


def test_settings_for_a_queue_that_does_not_exist_yet(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.put_settings(KEY, {"qpid.flow_stop_count": 10}, now=1.0)
    engine.apply_poll([info(11)], now=2.0)
    assert engine.entry(KEY).state.stopped


@pytest.mark.parametrize(("on_stale", "told"), [("hold", True), ("stop", True), ("go", False)])
def test_stale_data_keeps_state_and_applies_on_stale(tmp_path: Path, on_stale: str,
                                                     told: bool) -> None:
    engine = engine_at(tmp_path, on_stale=on_stale)
    engine.apply_poll([info(900)], now=0.0)
    assert engine.entry(KEY).told_stopped and not engine.entry(KEY).stale
    engine.poll_failed("connection refused", now=5.0)
    assert not engine.entry(KEY).stale
    engine.poll_failed("connection refused", now=11.0)
    entry = engine.entry(KEY)
    assert entry.stale and entry.state.stopped and entry.told_stopped is told
    engine.apply_poll([info(900)], now=12.0)
    assert not engine.entry(KEY).stale and engine.entry(KEY).told_stopped


def test_stale_stop_tells_off_queue_to_stop(tmp_path: Path) -> None:
    engine = engine_at(tmp_path, on_stale="stop")
    changes: list[Change] = []
    engine.listeners.append(changes.append)
    engine.apply_poll([info(1)], now=0.0)
    engine.poll_failed("timeout", now=20.0)
    assert engine.entry(KEY).told_stopped and not engine.entry(KEY).state.stopped
    assert [c.flow_stopped for c in changes] == [True]


def test_queue_without_statistics_does_not_move(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(None)], now=0.0)
    entry = engine.entry(KEY)
    assert entry.depth is None and entry.stale and not entry.state.stopped


def test_deleted_queue_loses_state_keeps_counter(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    changes: list[Change] = []
    engine.listeners.append(changes.append)
    engine.apply_poll([info(900)], now=0.0)
    engine.apply_poll([], now=1.0)  # one poll without it: maybe a torn page, kept
    assert engine.entry(KEY).state.stopped and changes[-1].flow_stopped is True
    engine.apply_poll([], now=1.5)
    assert engine.entry(KEY) is None
    assert changes[-1].flow_stopped is False and changes[-1].reason == "queue deleted"
    assert engine.stored_count(KEY) == 1
    engine.apply_poll([info(0)], now=2.0)
    assert not engine.entry(KEY).state.stopped and engine.entry(KEY).state.stopped_count == 1


def test_a_queue_missing_from_one_poll_only_keeps_its_state(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(900)], now=0.0)
    engine.apply_poll([], now=1.0)
    engine.apply_poll([info(900)], now=2.0)
    engine.apply_poll([], now=3.0)  # missing again, but not twice in a row
    entry = engine.entry(KEY)
    assert entry.state.stopped and entry.state.stopped_count == 1


def test_runtime_defaults_re_evaluate_and_persist(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(600)], now=0.0)
    engine.set_defaults(DefaultPolicy(50, 40), now=1.0)
    assert engine.entry(KEY).state.stopped
    assert engine_at(tmp_path).defaults == DefaultPolicy(50, 40)
    engine.set_defaults(None, now=2.0)
    assert engine.defaults == DefaultPolicy() and not engine.entry(KEY).state.stopped


def test_bad_declare_arguments_fall_back_to_defaults(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([info(0, **{"qpid.flow_stop_count": 500,
                                  "qpid.flow_resume_count": 600})], now=0.0)
    res = engine.entry(KEY).resolution
    assert res.count_source is Source.DEFAULT and "qpid.flow_resume_count=600" in res.errors[0]


def test_every_version_change_reaches_watchers_transitions_reach_listeners(
        tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    bumped: list[tuple[str, str]] = []
    changes: list[Change] = []
    engine.version_watchers.append(bumped.append)
    engine.listeners.append(changes.append)
    engine.apply_poll([info(10)], now=0.0)
    version = engine.entry(KEY).version
    engine.put_settings(KEY, {"qpid.flow_stop_count": 900}, now=1.0)  # thresholds only
    assert bumped == [KEY] and changes == []
    assert engine.entry(KEY).version == version + 1
    engine.put_settings(KEY, {"qpid.flow_stop_count": 5}, now=2.0)  # and a transition
    assert bumped == [KEY, KEY] and [c.flow_stopped for c in changes] == [True]


def test_a_failed_commit_loses_nothing_and_repeats_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk is full for one poll: its transition is neither lost nor told twice."""
    engine = engine_at(tmp_path)
    heard: list[Change] = []
    written: list[Change] = []
    engine.listeners.append(heard.append)
    engine.store_listeners.append(written.append)
    save, failures = engine.store.save_states, [sqlite3.OperationalError("disk is full")]

    def save_once_failing(*args: object) -> None:
        if failures:
            raise failures.pop()
        save(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.store, "save_states", save_once_failing)
    with pytest.raises(sqlite3.OperationalError):
        engine.apply_poll([info(801)], now=1.0)
    assert heard == [] and written == []  # nobody heard of an uncommitted change
    engine.apply_poll([info(802)], now=2.0)
    assert [(c.flow_stopped, c.stopped_count) for c in heard] == [(True, 1)]
    assert written == heard
    assert engine_at(tmp_path).stored_count(KEY) == 1  # and it is on disk


def test_a_store_listener_that_fails_takes_back_only_its_own_writes(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    store = engine.store

    def half_written(change: Change) -> None:
        with store.transaction() as db:
            db.execute("INSERT INTO kv VALUES ('half', '1')")
            raise RuntimeError("listener bug")

    engine.store_listeners.append(half_written)
    engine.apply_poll([info(801)], now=1.0)
    assert store.get_value("half") is None  # rolled back to its savepoint
    assert engine_at(tmp_path).stored_count(KEY) == 1  # the transition itself committed


def stream(messages: int, **arguments: object) -> QueueInfo:
    """A stream as RabbitMQ lists it: a message count, no message_bytes."""
    return QueueInfo("/", "orders", messages, None, arguments=arguments, queue_type="stream")


def test_a_queue_without_a_byte_count_does_not_watch_size(tmp_path: Path) -> None:
    """Unknown bytes are not 0 bytes: the size dimension is shown as not watched, and why."""
    engine = engine_at(tmp_path)
    engine.apply_poll([stream(5, **{"qpid.flow_stop_count": 10,
                                    "qpid.flow_stop_size": 100})], now=1.0)
    entry = engine.entry(KEY)
    assert entry.depth is not None and entry.depth.bytes is None
    res = entry.resolution
    assert (res.thresholds.count, res.count_source) == (Level(10, 10), Source.ARGUMENTS)
    assert (res.thresholds.size, res.size_source) == (None, Source.NONE)
    assert res.warnings == (("arguments: qpid.flow_stop_size=100 not watched: the broker "
                             "reports no byte count (message_bytes) for this stream queue"),)
    engine.apply_poll([stream(11, **{"qpid.flow_stop_count": 10,
                                     "qpid.flow_stop_size": 100})], now=2.0)
    assert engine.entry(KEY).state.stopped  # the count dimension still works


def test_a_stream_with_only_a_default_size_threshold_is_not_flow_controlled(
        tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([stream(3)], now=1.0)
    res = engine.entry(KEY).resolution
    assert not res.thresholds.enabled
    assert (res.count_source, res.size_source) == (Source.NONE, Source.NONE)
    assert res.warnings[0].startswith("default: qpid.flow_stop_size=83886080 not watched")


def test_bytes_reported_again_watch_size_again(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    engine.apply_poll([stream(3, **{"qpid.flow_stop_size": 100})], now=1.0)
    version = engine.entry(KEY).version
    engine.apply_poll([QueueInfo("/", "orders", 3, 150, {"qpid.flow_stop_size": 100})], 2.0)
    entry = engine.entry(KEY)
    assert entry.resolution.thresholds.size == Level(100, 100)
    assert entry.state.stopped and entry.version > version


@pytest.mark.parametrize("on_stale", ["hold", "stop", "go"])
def test_going_stale_and_fresh_again_is_a_new_version(tmp_path: Path, on_stale: str) -> None:
    """Long-pollers must hear of staleness whatever --on-stale says; a wait on `version`
    would otherwise last its whole timeout."""
    engine = engine_at(tmp_path, on_stale=on_stale)
    bumped: list[tuple[str, str]] = []
    engine.version_watchers.append(bumped.append)
    engine.apply_poll([info(1)], now=0.0)
    assert bumped == [] and not engine.entry(KEY).stale  # first sight: no flip to tell
    version = engine.entry(KEY).version
    engine.poll_failed("connection refused", now=11.0)
    assert engine.entry(KEY).stale and engine.entry(KEY).version > version
    assert bumped == [KEY]
    stale_version = engine.entry(KEY).version
    engine.apply_poll([info(1)], now=12.0)
    assert not engine.entry(KEY).stale and engine.entry(KEY).version > stale_version
    assert bumped == [KEY, KEY]
    assert engine.store.load_states()[KEY].version == engine.entry(KEY).version


def test_a_byte_count_a_round_late_keeps_the_last_one_and_watches_size(
        tmp_path: Path) -> None:
    """RabbitMQ may refresh `messages` a round before `message_bytes` on any queue: that
    is not a stream's missing byte count, and the size dimension stays watched."""
    engine = engine_at(tmp_path)
    engine.apply_poll([QueueInfo("/", "orders", 0, None)], now=1.0)
    entry = engine.entry(KEY)
    assert entry.depth == Depth(0, None) and entry.resolution.thresholds.size is not None
    assert entry.resolution.warnings == ()
    engine.apply_poll([QueueInfo("/", "orders", 2, 200)], now=2.0)
    engine.apply_poll([QueueInfo("/", "orders", 3, None)], now=3.0)
    entry = engine.entry(KEY)
    assert entry.depth == Depth(3, 200) and entry.resolution.size_source is Source.DEFAULT


def test_a_poll_that_hands_back_the_same_queue_info_ends_as_one_with_equal_copies(
        tmp_path: Path) -> None:
    """The Prometheus adapter keeps a queue's QueueInfo while its figures do not change, and
    the engine then only dates it again (`_redate`): what producers see must be what a poll
    of equal new objects gives, live samples and a stopped queue included."""
    from dataclasses import replace

    from sidecar.model import LiveSample
    kept = [QueueInfo("/", "a", 5, 50, unacked=1, consumers=1, unacked_limit=2),
            QueueInfo("/", "full", 901, 9010, {"qpid.flow_stop_count": 900}, unacked=0),
            QueueInfo("/", "none", None, None)]
    engines = [FlowEngine(Store(tmp_path / f"{n}.sqlite3"), DefaultPolicy(), stale_after=10.0,
                          statistics_lag=2.0) for n in ("same", "copies")]
    H = 1_795_392_000.0
    for t in range(8):
        for engine, infos in zip(engines, (kept, [replace(i) for i in kept])):
            if t == 3:  # a live reading newer than the statistics, then older again
                engine.apply_live([LiveSample("/", "a", 7, at=H + t - 0.5)], H + t - 0.4)
            engine.apply_poll(infos, H + t, H + t - 0.1)
        shown = [[(e.depth, e.state, e.sampled_at, e.statistics_at, e.bound, e.stale,
                   e.origin, e.told_stopped, e.version, e.live)
                  for e in sorted(engine.entries(), key=lambda e: e.name)]
                 for engine in engines]
        assert shown[0] == shown[1], t


@pytest.mark.parametrize("seed", range(12))
def test_a_poll_that_walks_only_what_changed_tells_what_a_full_walk_tells(
        tmp_path: Path, seed: int) -> None:
    """A poll steps and re-tells only the queues whose figures changed, came back fresh or
    went missing, unless a broker-wide reason moved (`BrokerWide.generation`); the vhost
    totals are summed again only after a depth moved. Against an engine given equal copies
    (every queue walked), through failed polls (stale and fresh again), alarms, a broker
    quota crossed by queues that did not change, live samples and a queue left out."""
    import random
    from dataclasses import replace

    from sidecar.flow.broker_alarms import NodeStatus
    from sidecar.model import LiveSample
    rng = random.Random(seed)
    names = [f"q{i}" for i in range(6)]
    infos = {n: QueueInfo("/", n, 0, 0, {"qpid.flow_stop_count": 10,
                                         "qpid.flow_resume_count": 5}, unacked=0)
             for n in names}
    on_stale = rng.choice(["hold", "stop", "go"])
    engines = [FlowEngine(Store(tmp_path / f"{n}.sqlite3"), DefaultPolicy(), stale_after=1.5,
                          on_stale=on_stale)  # type: ignore[arg-type]
               for n in ("same", "copies")]
    told: list[list[Change]] = [[], []]
    for engine, changes in zip(engines, told):
        engine.listeners.append(changes.append)
    alarmed, quota = False, None
    for t in range(60):
        now = 1_000.0 + t
        action = rng.choice(["poll", "poll", "poll", "move", "fail", "fail", "alarm",
                             "quota", "live", "gap"])
        if action == "move":
            name = rng.choice(names)
            infos[name] = replace(infos[name], messages=rng.randrange(0, 14))
        elif action == "alarm":
            alarmed = not alarmed
        elif action == "quota":
            quota = None if quota else {"overfullMessages": rng.randrange(8, 30),
                                        "underfullMessages": 4}
        live = LiveSample("/", rng.choice(names), rng.randrange(0, 14), at=now - 0.5)
        for engine in engines:
            copies = engine is engines[1]
            if action == "fail":
                engine.poll_failed("HTTP 503", now)
                continue
            if action == "live":
                engine.apply_live([live], now - 0.4)
            engine.broker_wide.read_alarms({"rabbit@a": NodeStatus(alarmed, False)}, now)
            engine.broker_wide.read_broker_quotas({"/": quota} if quota else {}, now)
            listed = [i for n, i in infos.items() if action != "gap" or n != "q0"]
            engine.apply_poll([replace(i) for i in listed] if copies else listed, now)
        shown = [[(e.depth, e.state, e.stale, e.stop_reasons, e.told_stopped, e.version,
                   e.bound, e.sampled_at) for e in sorted(engine.entries(), key=lambda e: e.name)]
                 for engine in engines]
        assert shown[0] == shown[1], (t, action)
        assert told[0] == told[1], (t, action)
        assert engines[0].broker_wide.state("/") == engines[1].broker_wide.state("/")
        if action != "fail":  # the vhost total the quota stepped on is the queues' own
            assert engines[0].broker_wide.depth("/") == Depth(
                sum(e.depth.messages for e in engines[0].entries() if e.depth), 0), t


def test_queues_per_vhost_are_counted_again_when_one_comes_or_goes(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    a, b, c = (QueueInfo("/", "a", 0, 0), QueueInfo("/", "b", 0, 0),
               QueueInfo("other", "c", 0, 0))
    engine.apply_poll([a, b], now=1.0)
    assert engine.vhost_queue_counts() == {"/": 2}
    engine.apply_poll([a, b, c], now=2.0)
    counts = engine.vhost_queue_counts()
    assert counts == {"/": 2, "other": 1}
    counts["other"] = 7  # a copy: the engine's own stays
    engine.apply_poll([a, c], now=3.0)  # b missing once: maybe a torn page, kept
    assert engine.vhost_queue_counts() == {"/": 2, "other": 1}
    engine.apply_poll([a, c], now=4.0)  # twice: gone
    assert engine.vhost_queue_counts() == {"/": 1, "other": 1}


def test_an_equal_depth_keeps_the_entrys_object(tmp_path: Path) -> None:
    """A poll whose figures equal the entry's (a new `QueueInfo`, the same numbers) keeps
    the entry's `Depth`: an equal new one per queue and poll lived on in 10,000 entries,
    young objects for every garbage collection to walk."""
    engine = engine_at(tmp_path)
    engine.apply_poll([info(5, 50)], now=1.0)
    entry = engine.entry(KEY)
    assert entry is not None and entry.depth == Depth(5, 50)
    first = entry.depth
    engine.apply_poll([info(5, 50)], now=2.0)
    assert entry.depth is first and entry.sampled_at == 2.0
    engine.apply_poll([info(6, 60)], now=3.0)
    assert entry.depth == Depth(6, 60)
