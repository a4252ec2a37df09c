"""The history's `settings` records against a real engine and store: written when a queue's
producer classes change (API, removal, another replica) and once when pacing is first used
on it, never on a restart's restore; read back by the pipeline's graded report."""

from __future__ import annotations

from pathlib import Path

from api.store import Store
from pipeline.graded import QueueRows
from sidecar.flow.engine import FlowEngine
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.records.history import HistoryRecorder
from sidecar.signals.producer_reports import ProducerReports
from tests.unit.test_history import H, lines

KEY = ("/", "orders")


def info(messages: int) -> QueueInfo:
    return QueueInfo("/", "orders", messages, messages, arguments={
        "qpid.flow_stop_count": 100, "qpid.flow_resume_count": 50})


class Sidecar:
    """An engine, a recorder and producer reports wired as `sidecar.runtime` wires them."""

    def __init__(self, tmp_path: Path) -> None:
        self.now = H
        self.engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(),
                                 stale_after=10.0)
        self.recorder = HistoryRecorder(tmp_path / "history", clock=lambda: self.now)
        settings = self.recorder.settings
        self.engine.version_watchers.append(lambda key: settings.on_version(self.engine, key))
        self.reports = ProducerReports(on_new_producer=settings.pacing_used)

    def poll(self, at: float, depth: int = 10) -> None:
        self.now = H + at
        self.engine.apply_poll([info(depth)], self.now)
        self.recorder.on_poll(self.engine, self.now)

    def close(self) -> None:
        self.recorder.close()
        self.engine.store.close()


def settings_records(tmp_path: Path) -> list[tuple[float, dict[str, object]]]:
    return [(r["ts"] - H, {k: v for k, v in r.items() if k not in ("type", "ts")})
            for r in lines(tmp_path / "history") if r["type"] == "settings"]


def test_class_changes_and_the_first_pacing_report_each_write_one_record(
        tmp_path: Path) -> None:
    sidecar = Sidecar(tmp_path)
    sidecar.poll(0)
    sidecar.now = H + 1
    sidecar.engine.put_settings(KEY, {}, sidecar.now, classes={"bulk": 0.5})
    sidecar.now = H + 2
    sidecar.engine.put_settings(KEY, {}, sidecar.now, classes={"bulk": 0.5})  # no change
    sidecar.poll(3, depth=60)  # bulk stops: the version moves, the classes do not
    for at, producer, count in [(4, "p1", 10), (5, "p1", 20), (6, "p2", 5)]:
        sidecar.now = H + at
        sidecar.reports.record(KEY, producer, count, sidecar.now)
    sidecar.poll(7)  # the pacing record goes with the poll's batch
    sidecar.now = H + 8
    sidecar.engine.adopt_shared({KEY: {}}, {}, sidecar.now,
                                classes={KEY: {"bulk": 0.25, "web": 1}})
    sidecar.now = H + 9
    sidecar.engine.delete_settings(KEY, sidecar.now)
    sidecar.close()

    name = {"vhost": "/", "queue": "orders"}
    assert settings_records(tmp_path) == [
        (1, {**name, "producerClasses": {"bulk": 0.5}}),
        (4, {**name, "pacing": True}),  # p1's first report; p2's is not news
        (8, {**name, "producerClasses": {"bulk": 0.25, "web": 1.0}}),
        (9, {**name, "producerClasses": {}})]
    rows = QueueRows()  # what the pipeline's graded report takes as the enable moments
    for record in lines(tmp_path / "history"):
        if record["type"] in ("settings", "warning", "transition"):
            rows.add(record)
    assert rows.enabled == [H + 1, H + 4, H + 8]


def test_a_restart_restores_classes_without_a_record_and_pacing_is_news_again(
        tmp_path: Path) -> None:
    first = Sidecar(tmp_path)
    first.poll(0)
    first.engine.put_settings(KEY, {}, H, classes={"bulk": 0.5})
    first.reports.record(KEY, "p1", 1, H)
    first.close()
    second = Sidecar(tmp_path)
    second.poll(10, depth=60)  # restored with its classes; bulk stops: no record
    second.poll(11, depth=101)
    second.now = H + 12
    second.reports.record(KEY, "p1", 2, second.now)
    second.close()  # the waiting pacing record is written at close
    assert [(at, "pacing" in r) for at, r in settings_records(tmp_path)] == [
        (0, False), (0, True), (12, True)]
