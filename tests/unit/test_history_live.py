"""An episode shorter than a poll, seen only by live samples, still reaches the history
with its start, its peaks and its end as samples (the pipeline builds episodes from
samples), while steady live depths add nothing to what the polls write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import LiveSample, QueueInfo
from sidecar.records.history import HistoryRecorder

H = 1795392000.0  # 2026-11-23T00:00:00Z


def test_a_short_episode_between_two_polls_is_recorded(tmp_path: Path) -> None:
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=10.0,
                        statistics_lag=2.0)
    recorder = HistoryRecorder(tmp_path / "history", interval=5.0, clock=lambda: H)
    engine.listeners.append(recorder.on_change)
    # no consumer and no byte threshold: a live sample is an upper bound that can release
    stats = QueueInfo("/", "orders", 5, 50, unacked=0, consumers=0, unacked_limit=0,
                      arguments={"x-max-length": 1000, "x-overflow": "reject-publish",
                                 "qpid.flow_stop_size": 0})
    engine.apply_poll([stats], H)
    recorder.on_poll(engine, H)
    for t, ready in [(0.1, 5), (0.2, 801), (0.3, 850), (0.4, 820), (0.5, 900), (0.6, 650),
                     (0.7, 640)]:
        samples = [LiveSample("/", "orders", ready, H + t)]
        engine.apply_live(samples, H + t)
        recorder.on_live(engine, samples, H + t)
    engine.apply_poll([stats], H + 1)  # the statistics never saw the episode
    recorder.on_poll(engine, H + 1)
    recorder.close()

    records = [json.loads(line) for path in sorted((tmp_path / "history").rglob("*.jsonl"))
               for line in path.read_text().splitlines()]
    samples: list[tuple[Any, ...]] = [(round(r["ts"] - H, 1), r["messages"], r["flowStopped"])
                                      for r in records if r["type"] == "sample"]
    assert samples == [(0.0, 5, False),                   # the poll
                       (0.2, 801, True), (0.3, 850, True),  # start, a peak (820 is not)
                       (0.5, 900, True), (0.6, 650, False),  # the peak, the end
                       (1.0, 640, False)]  # the poll: the live depth, newer than its 5
    assert [r["event"] for r in records if r["type"] == "transition"] == [
        "overfull", "underfull"]
    assert engine.entry(("/", "orders")).state.stopped_count == 1  # type: ignore[union-attr]
