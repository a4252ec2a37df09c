"""End to end: a sidecar records a real queue filled and drained twice past its thresholds;
`flow-pipeline`, run as a user runs it, finds exactly those two episodes and their peaks,
and `--apply --yes` puts its recommendation into the (restarted) sidecar."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess

PIPELINE = Path(sys.executable).with_name("flow-pipeline")
TOKEN = "pipeline-test-token"


def only_queue(recorded: Path, queue: str, copy: Path) -> Path:
    """The recorded files with only one queue's lines (the broker is shared with other
    tests, whose queues the sidecar records too and --apply must not touch)."""
    for path in recorded.rglob("*.jsonl"):
        target = copy / path.relative_to(recorded)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(line for line in path.read_text().splitlines(True)
                                  if json.loads(line)["queue"] == queue))
    return copy


def test_two_fills_past_stop_are_two_episodes_with_their_peaks(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess],
    qname: Callable[[str], str], tmp_path: Path,
) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2", "--history-interval", "0.5",
                              "--token", TOKEN).start()
    q = known(sidecar, broker.declare(qname("recorded"), {
        "x-max-length": 100, "x-overflow": "reject-publish",
        "qpid.flow_stop_count": 20, "qpid.flow_resume_count": 10}))
    depth = 0
    for peak in (30, 45):  # stop 20, resume 10: up to the peak, back down to 5
        broker.publish(q, peak - depth)
        assert wait_depth(sidecar, q, peak)["flowStopped"] is True
        broker.drain(q, peak - 5)
        depth = 5
        wait_depth(sidecar, q, depth, stopped=False)
    sidecar.stop()  # the recorder writes what it has queued on the way out
    # The same sidecar again (its history elsewhere, so the input stays still) to take the
    # recommendations. --margin 0.6 leaves 40 under the max of 100: stop 20 + the p99
    # overshoot 25 = 45 does not fit, so the stop becomes 40 - 25 = 15; the gap of 10 scales
    # with it to ceil(10 x 15 / 20) = 8: resume 7.
    again = sidecar_factory("--token", TOKEN, "--history-dir", str(tmp_path / "later"),
                            data_dir=sidecar.data_dir).start()
    known(again, q)

    history = only_queue(sidecar.data_dir / "history", q, tmp_path / "history")
    out = tmp_path / "out"
    done = subprocess.run(
        [str(PIPELINE), "--master", "local[2]", "--history", str(history),
         "--out", str(out), "--margin", "0.6", "--apply", again.url, "--yes", "--token", TOKEN],
        check=False, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True,
        text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 corrupt, 0 missing a field" in done.stdout
    with open(out / "episodes.csv", newline="", encoding="utf-8") as f:
        episodes = [e for e in csv.DictReader(f) if e["queue"] == q]
    assert [(e["peakMessages"], e["overshootMessages"], e["stopCount"], e["open"])
            for e in episodes] == [("30", "10", "20", "False"), ("45", "25", "20", "False")]
    assert all(float(e["durationSeconds"]) > 0 for e in episodes)
    with open(out / "recommendations.csv", newline="", encoding="utf-8") as f:
        count = next(r for r in csv.DictReader(f) if r["queue"] == q
                     and r["dimension"] == "count")
    assert (count["maximum"], count["peak"], count["episodes"], count["overshootP99"]) == (
        "100", "45", "2", "25")
    assert f"PUT {queue_path(q)}/flow" in done.stdout and ": done" in done.stdout
    view = again.get(queue_path(q)).json()
    assert (view["settings"]["qpid.flow_stop_count"], view["settings"]["qpid.flow_resume_count"],
            view["sources"]["count"]) == (15, 7, "api")
