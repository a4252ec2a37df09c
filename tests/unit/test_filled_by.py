"""Who filled it, wired: grants noted per queue within the minute and bounded, reports read
at the stop, classes lent from reports to grants, the stop's QUE-1003 line, the history's
transition record, and the last ranking per queue."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.state_machine import Depth, EventKind, FlowEvent
from sidecar.flow.thresholds import DefaultPolicy, Level, Thresholds
from sidecar.model import Change, QueueInfo, QueueKey
from sidecar.records.filled_by import FilledBy, reported_in
from sidecar.records.history import HistoryRecorder
from sidecar.records.top_producers import Kind, ProducerEvent
from sidecar.signals.grant_desk import ANONYMOUS
from sidecar.signals.grants import Grant
from sidecar.signals.producer_reports import ProducerReports

Q: QueueKey = ("/", "orders")
OTHER: QueueKey = ("/", "audit")


def grant(producer: str, messages: int, *queues: QueueKey) -> Grant:
    return Grant(f"g-{producer}-{messages}", producer, frozenset(queues or (Q,)), messages,
                 None, 1e12)


def report(producer: str, messages: int, since: float, at: float,
           producer_class: str | None = None) -> ProducerEvent:
    return ProducerEvent(Q, producer, producer_class, Kind.PUBLISHED, messages, at, since)


def test_the_worked_example_from_grants_and_reports() -> None:
    """docs/graded-flow.md: the stop at 100 s ranks batch-7, importer, payments."""
    reports = [report("batch-7", 6000, 40, 100, "bulk"), report("importer", 2500, 40, 100,
                                                                "bulk"),
               report("payments", 1500, 40, 100, "critical")]
    filled = FilledBy(lambda key, at: [r for r in reports if r.queue == key])
    filled.granted(grant("importer", 2000), 90.0)
    filled.granted(grant("importer", 1000), 95.0)
    ranking = filled.stopped(Q, 100.0)
    assert [(c.producer, c.producer_class, round(c.messages)) for c in ranking] == [
        ("batch-7", "bulk", 6000), ("importer", "bulk", 3000), ("payments", "critical", 1500)]
    assert filled.top_json(Q) == [
        {"producer": "batch-7", "class": "bulk", "messages": 6000, "share": 0.571},
        {"producer": "importer", "class": "bulk", "messages": 3000, "share": 0.286},
        {"producer": "payments", "class": "critical", "messages": 1500, "share": 0.143}]


def test_grants_count_on_each_of_their_queues_within_the_minute() -> None:
    filled = FilledBy()
    filled.granted(grant("old", 500, Q), 10.0)
    filled.granted(grant("fan-out", 40, Q, OTHER), 50.0)
    filled.granted(grant(ANONYMOUS, 900, Q), 60.0)  # nobody to name
    assert [c.producer for c in filled.stopped(Q, 65.0)] == ["old", "fan-out"]
    assert [c.producer for c in filled.stopped(Q, 80.0)] == ["fan-out"]  # 10 s is out
    assert [c.producer for c in filled.stopped(OTHER, 80.0)] == ["fan-out"]
    filled.sweep(111.0)  # every grant older than a minute: the queues are forgotten
    assert filled.stopped(Q, 111.0) == () and filled.top_json(Q) == []


def test_memory_is_bounded_per_queue_and_over_queues() -> None:
    filled = FilledBy(per_queue=3, queues=2)
    for i in range(10):
        filled.granted(grant(f"p{i}", 1), 50.0 + i)
    assert {c.producer for c in filled.stopped(Q, 60.0)} == {"p7", "p8", "p9"}
    filled.stopped(OTHER, 61.0)
    filled.stopped(("/", "third"), 62.0)
    assert filled.last(Q) is None and filled.last(OTHER) is not None  # the oldest stop went
    assert filled.top_json(("/", "never")) is None


def test_a_failing_report_source_names_nobody_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_key: QueueKey, _at: float) -> list[ProducerEvent]:
        raise RuntimeError("reports unavailable")

    filled = FilledBy(broken)
    filled.granted(grant("importer", 10), 1.0)
    with caplog.at_level(logging.ERROR):
        assert filled.stop_note(Q, 2.0) == ""
    assert "cannot rank the producers" in caplog.text
    assert filled.top_json(Q) == []  # not an earlier stop's


def test_the_stop_line_names_them_after_qpids_words(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0)
    filled = FilledBy()
    engine.told.stop_note = filled.stop_note
    filled.granted(grant("batch-7\n[vh(/)/qu(x)]", 600), 0.5)  # names cannot forge lines
    filled.granted(grant("importer", 201), 0.6)
    info = QueueInfo("/", "orders", 801, 0, arguments={"x-max-length": 1000,
                                                       "x-overflow": "reject-publish"})
    with caplog.at_level(logging.INFO, logger="flow_sidecar.flow"):
        engine.apply_poll([info], now=1.0)
        engine.apply_poll([QueueInfo("/", "orders", 10, 0, arguments=info.arguments)], 2.0)
    lines = [r.getMessage() for r in caplog.records if " QUE-100" in r.getMessage()]
    assert lines[0] == ("[vh(/)/qu(orders)] QUE-1003 : Overfull : Size : 0 bytes, Capacity : "
                        "83,886,080, Messages : 801, Message Capacity : 800 - top producers: batch-7\\n[vh(/)/qu(x)] 600 (75%), "
                        "importer 201 (25%)")
    assert lines[1].endswith("Messages : 10, Message Capacity : 700")  # a resume: as it was


def test_the_history_records_a_stops_ranking_only(tmp_path: Path) -> None:
    filled = FilledBy()
    filled.granted(grant("importer", 5), 1.0)
    recorder = HistoryRecorder(tmp_path, top_producers=filled.top_json)
    over, under = (FlowEvent(kind, Depth(801, 0), Thresholds(count=Level(800, 700)), 1)
                   for kind in (EventKind.OVERFULL, EventKind.UNDERFULL))
    filled.stopped(Q, 2.0)
    recorder.on_change(Change("/", "orders", 1, True, over, "", 1))
    recorder.on_change(Change("/", "orders", 2, False, under, "", 1))
    recorder.on_change(Change("/", "orders", 3, True, None, "stale", 1))
    recorder.close()
    records = [json.loads(line) for f in sorted(tmp_path.rglob("*.jsonl"))
               for line in f.read_text().splitlines()]
    assert [r.get("topProducers") for r in records] == [
        [{"producer": "importer", "class": None, "messages": 5, "share": 1.0}], None, None]


def test_reports_count_from_the_reports_listing_with_their_class() -> None:
    reports = ProducerReports()
    for second, count in ((20, 0), (45, 100), (70, 400), (99, 900)):
        reports.record(Q, "batch-7", count, float(second), "bulk")
    reports.record(Q, "quiet", 5, 99.0)  # one report: nothing to count yet
    filled = FilledBy(reported_in(reports))
    filled.granted(grant("batch-7", 100), 98.0)  # a grant: the report's class, the larger
    assert filled.top_json(Q) is None
    filled.stopped(Q, 100.0)  # the minute: the reports from 45 s to 99 s
    assert filled.top_json(Q) == [
        {"producer": "batch-7", "class": "bulk", "messages": 800, "share": 1.0}]
