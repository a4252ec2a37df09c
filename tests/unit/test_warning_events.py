"""Warning episodes leave the engine as events: to the SSE streams and webhook
subscriptions that asked for them (and no others), as one log line per start and end, as
history records, in the same commit as the flow changes."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.fill_rate import WarningEvent, WarningKind
from sidecar.flow.forecast import WarningNote
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import Change, Depth, QueueInfo
from sidecar.flow.poller import Poller
from sidecar.records.history import warning_record
from sidecar.records.metrics import FlowCollector, metrics_registry
from sidecar.records.warning_episodes import record_episodes
from sidecar.signals.change_fanout import ChangeHub
from sidecar.signals.webhook_outbox import WebhookOutbox

KEY = ("/", "fills")
STARTED = WarningNote(KEY, WarningEvent(WarningKind.STARTED, 103.0, 1, 103.0),
                      Depth(600, 6000), 30.04, 9.96)
ENDED = WarningNote(KEY, WarningEvent(WarningKind.ENDED, 140.0, 1, 103.0), Depth(40, 400),
                    None, -20.0)


def info(messages: int) -> QueueInfo:
    return QueueInfo("/", "fills", messages, 10 * messages, unacked=0,
                     arguments={"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500})


def test_one_log_line_per_episode_start_and_end_never_a_stop(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=60.0)
    caplog.set_level(logging.INFO, "flow_sidecar.flow")
    depths = [570, 580, 590, 600, 610, 620, 630] + [630] * 20  # fills, then stands
    for t, depth in enumerate(depths):
        engine.apply_poll([info(depth)], now=100.0 + t)
    for t in range(20):  # drains well under the fraction: the episode ends 15 s later
        engine.apply_poll([info(100)], now=130.0 + t)
    lines = [r.getMessage() for r in caplog.records if "FSW-" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("[vh(/)/qu(fills)] FSW-4301 : Flow Warning : Size : 6,000 "
                               "bytes, Messages : 600, Seconds To Stop : 30.0 at 10.0 "
                               "messages/s (episode 1)")
    assert lines[1].startswith("[vh(/)/qu(fills)] FSW-4302 : Flow Warning Cleared : ")
    assert engine.entry(KEY).state.stopped_count == 0  # type: ignore[union-attr]


def episodes_logged(engine: FlowEngine, caplog: pytest.LogCaptureFixture,
                    start: float) -> list[str]:
    """Fill the queue into a warning, drain it until the episode ends: its log lines."""
    caplog.clear()
    for t, depth in enumerate([570, 580, 590, 600, 610, 620, 630] + [100] * 20):
        engine.apply_poll([info(depth)], now=start + t)
    return [r.getMessage().split("(episode ")[1] for r in caplog.records
            if "FSW-" in r.getMessage()]


def test_a_restart_numbers_the_next_episode_after_the_last(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "flow_sidecar.flow")
    path = tmp_path / "db.sqlite3"
    store = Store(path)
    first = FlowEngine(store, DefaultPolicy(), stale_after=60.0)
    record_episodes(first, store)
    assert episodes_logged(first, caplog, 100.0) == ["1)", "1)"]
    assert episodes_logged(first, caplog, 200.0) == ["2)", "2)"]
    # a new process on the same file (nothing closed: as after kill -9)
    store = Store(path)
    again = FlowEngine(store, DefaultPolicy(), stale_after=60.0)
    record_episodes(again, store)
    assert episodes_logged(again, caplog, 300.0) == ["3)", "3)"]
    assert again.entry(KEY).episodes.count == 3  # type: ignore[union-attr]


def test_the_warnings_counter_never_falls_when_a_queue_goes_or_the_sidecar_restarts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "db.sqlite3"

    def counted(engine: FlowEngine, total: Callable[[], int]) -> float | None:
        collector = FlowCollector(engine, Poller(None, engine, 1.0),  # type: ignore[arg-type]
                                  warning_episodes=total)
        return metrics_registry(collector).get_sample_value("flow_sidecar_warnings_total")

    store = Store(path)
    engine = FlowEngine(store, DefaultPolicy(), stale_after=60.0)
    episodes = record_episodes(engine, store)
    episodes_logged(engine, caplog, 100.0)
    episodes_logged(engine, caplog, 200.0)
    assert counted(engine, episodes.total) == 2.0
    other = QueueInfo("/", "other", 0, 0, unacked=0)
    for t in (300.0, 301.0):  # the queue is deleted (gone from two polls): its episodes stay
        engine.apply_poll([other], now=t)
    assert engine.entry(KEY) is None and counted(engine, episodes.total) == 2.0
    store = Store(path)  # a new process on the same file, as after kill -9
    again = FlowEngine(store, DefaultPolicy(), stale_after=60.0)
    assert counted(again, record_episodes(again, store).total) == 2.0


def test_an_episode_starts_after_the_shared_floor(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "flow_sidecar.flow")
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=60.0)
    notes: list[WarningNote] = []
    engine.journal.warning_listeners.append(notes.append)
    engine.figures.episode_floor = lambda key: 4  # the other replicas recorded 4 episodes
    assert episodes_logged(engine, caplog, 100.0) == ["5)", "5)"]
    assert [n.event.episode for n in notes] == [5, 5]


def test_streams_get_warnings_only_when_they_asked_and_replay_keeps_to_that() -> None:
    async def scenario() -> None:
        hub = ChangeHub()
        plain = hub.subscribe(lambda key: True)

        def warned(key: object) -> bool:
            return True
        asking = hub.subscribe(warned, warnings=True)
        hub.on_change(Change("/", "fills", 2, True))
        hub.on_warning(STARTED)
        assert plain.queue.qsize() == 1 and asking.queue.qsize() == 2
        asking.queue.get_nowait()  # the flow change
        item = asking.queue.get_nowait()
        assert item is not None
        seq, note = item
        frame = hub.frame(seq, note).decode()
        assert frame.startswith(f"id: {hub.event_id(seq)}\nevent: flow.warning\ndata: ")
        data = json.loads(frame.split("data: ", 1)[1])
        assert data == {"vhost": "/", "queue": "fills", "warning": True, "episode": 1,
                        "startedAt": "1970-01-01T00:01:43.000Z",
                        "at": "1970-01-01T00:01:43.000Z",
                        "depth": {"messages": 600, "bytes": 6000}, "fillRate": 10.0,
                        "secondsToStop": 30.0}
        first = hub.event_id(1)
        assert [s for s, _ in hub.missed(first, warned) or []] == [2]
        assert hub.missed(first, lambda key: True) == []
    asyncio.run(scenario())


def test_webhooks_that_asked_get_warning_events_without_taking_a_sequence(
        tmp_path: Path) -> None:
    def event(change: Change, sequence: int, now: float) -> dict[str, Any]:
        return {"sequence": sequence}
    outbox = WebhookOutbox(Store(tmp_path / "db.sqlite3"), event, clock=lambda: 100.0)
    plain = outbox.create(url="http://127.0.0.1:9/a", secret="s", vhost="*", queue="*")
    asking = outbox.create(url="http://127.0.0.1:9/b", secret="s", vhost="*", queue="fill*",
                           warnings=True)
    outbox.on_change(Change("/", "fills", 2, True))
    outbox.on_warning(STARTED)
    outbox.on_warning(ENDED)
    assert [r.sequence for r in outbox.deliveries(plain.id, 10)] == [1]
    rows = list(reversed(outbox.deliveries(asking.id, 10)))
    assert [(r.sequence, json.loads(r.body).get("type")) for r in rows] == [
        (1, None), (1, "flow.warning"), (1, "flow.warning-cleared")]
    reopened = WebhookOutbox(Store(tmp_path / "db.sqlite3"), event)  # kept across restarts
    assert reopened.get(asking.id).warnings and not reopened.get(plain.id).warnings  # type: ignore[union-attr]


def test_history_records_each_start_and_end() -> None:
    assert warning_record(STARTED, 104.5) == {
        "type": "warning", "ts": 104.5, "vhost": "/", "queue": "fills", "event": "warning",
        "episode": 1, "at": 103.0, "startedAt": 103.0, "messages": 600, "bytes": 6000,
        "secondsToStop": 30.0, "fillRate": 10.0}
    assert warning_record(ENDED, 141.0)["event"] == "warning-cleared"
    assert "secondsToStop" not in warning_record(ENDED, 141.0)
