"""The history recorder against a real engine and store: what it writes, when, and where."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.records.history import HistoryFiles, HistoryRecorder

H = 1795392000.0  # 2026-11-23T00:00:00Z


def info(messages: int, name: str = "orders") -> QueueInfo:
    return QueueInfo("/", name, messages, messages * 10, publish_rate=2.5,
                     arguments={"x-max-length": 1000, "x-overflow": "reject-publish"})


def lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(directory.rglob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_samples_on_change_and_every_interval_and_one_record_per_transition(
        tmp_path: Path) -> None:
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0)
    now = [H]
    recorder = HistoryRecorder(tmp_path / "history", interval=5.0, clock=lambda: now[0],
                               capacity=lambda key: 40)
    engine.listeners.append(recorder.on_change)
    for t, depth in [(0, 5), (1, 5), (2, 6), (6.9, 6), (7, 6), (8, 801), (9, 801), (10, 750)]:
        now[0] = H + t
        engine.apply_poll([info(depth)], now[0])
        recorder.on_poll(engine, now[0])
    for t in (11, 12):  # deleted while stopped (missing from two polls): a transition
        now[0] = H + t
        engine.apply_poll([], now[0])
        recorder.on_poll(engine, now[0])
    recorder.close()

    records = lines(tmp_path / "history")
    assert [(r["type"], r["ts"] - H) for r in records] == [
        ("sample", 0), ("sample", 2), ("sample", 7),            # change, change, interval
        ("transition", 8), ("sample", 8), ("sample", 10),       # 9: unchanged; 10: depth
        ("transition", 12)]
    assert records[-1]["reason"] == "queue deleted" and records[-1]["toldStopped"] is False
    transition, on = records[3], records[4]
    assert transition == {
        "type": "transition", "ts": H + 8, "vhost": "/", "queue": "orders", "version": 1,
        "toldStopped": True, "reason": "", "event": "overfull", "flowStopped": True,
        "flowStoppedCount": 1, "messages": 801, "bytes": 8010,
        "stopCount": 800, "resumeCount": 700, "stopSize": 83886080, "resumeSize": 73400320}
    assert on == {
        "type": "sample", "ts": H + 8, "vhost": "/", "queue": "orders", "messages": 801,
        "bytes": 8010, "flowStopped": True, "flowStoppedCount": 1, "toldStopped": True,
        "stale": False, "stopCount": 800, "resumeCount": 700, "stopSize": 83886080,
        "resumeSize": 73400320, "maxMessages": 1000, "maxBytes": 104857600,
        "publishRate": 2.5, "producerCapacity": 40,
        "countSource": "default", "sizeSource": "default"}
    assert (tmp_path / "history" / "date=2026-11-23" / "00.jsonl").is_file()


def test_hourly_files_and_a_partial_last_line_is_closed_before_appending(
        tmp_path: Path) -> None:
    files = HistoryFiles(tmp_path)
    assert files.append([{"ts": H + 3599.5, "n": 1}, {"ts": H + 3600, "n": 2}]) == 2
    files.close()
    first = tmp_path / "date=2026-11-23" / "00.jsonl"
    second = tmp_path / "date=2026-11-23" / "01.jsonl"
    with open(second, "ab") as f:
        f.write(b'{"ts": 17953956')  # a crash in the middle of a line
    files.append([{"ts": H + 3700, "n": 3}])
    files.close()
    assert [json.loads(x)["n"] for x in first.read_text().splitlines()] == [1]
    assert second.read_text().splitlines() == ['{"ts":1795395600.0,"n":2}', '{"ts": 17953956',
                                               '{"ts":1795395700.0,"n":3}']


def test_partitions_past_the_retention_are_deleted(tmp_path: Path) -> None:
    for day in ("2026-11-14", "2026-11-15", "2026-11-22", "not-a-date"):
        (tmp_path / f"date={day}").mkdir()
    (tmp_path / "date=2026-11-14" / "00.jsonl").write_text("{}\n")
    gone = HistoryFiles(tmp_path, retention_days=7).prune(date(2026, 11, 22))
    assert [p.name for p in gone] == ["date=2026-11-14"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "date=2026-11-15", "date=2026-11-22", "date=not-a-date"]
