"""The dashboard in a real headless Chromium, and /metrics over HTTP, against a real
sidecar process and the real RabbitMQ.

Chromium loads the real `/ui` page, runs its script for a few seconds of virtual time
(`--virtual-time-budget` waits for the page's fetches) and dumps the DOM it built, so the
assertions are about what an operator's browser shows, not about the JSON behind it.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
# MACHINE-NOTES: without these the closed network makes Chromium retry connections
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=5000"]
THRESHOLDS: dict[str, object] = {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2}


class QueueRows(HTMLParser):
    """The dashboard's rows (`<tr data-queue=...>`) with their attributes and cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str | None]] = {}
        self.cells: dict[str, list[str]] = {}
        self.tags: dict[str, list[str]] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        queue = found.get("data-queue")
        if tag == "tr" and queue:
            self._current = queue
            self.rows[queue], self.cells[queue], self.tags[queue] = found, [], []
        elif self._current is not None:
            self.tags[self._current].append(tag)
            if tag == "td":
                self.cells[self._current].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._current = None

    def handle_data(self, data: str) -> None:
        if self._current is not None and self.cells[self._current]:
            self.cells[self._current][-1] += data


def chromium(tmp_path: Path, url: str, *action: str) -> str:
    """Run headless Chromium on `url` with a fresh profile; its stdout."""
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run the tests with deploy/test.sh, which runs "
                    "deploy/ensure-chromium.sh")
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    done = subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *action, url],
        check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dashboard(tmp_path: Path, url: str) -> QueueRows:
    parsed = QueueRows()
    parsed.feed(chromium(tmp_path, url, "--dump-dom"))
    return parsed


def test_dashboard_marks_a_queue_stopped_after_it_fills(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names,
    tmp_path: Path
) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    full = known(sidecar, broker.declare(qname("orders"), THRESHOLDS))
    calm = known(sidecar, broker.declare(qname("calm"), THRESHOLDS))
    broker.publish(full, 3)
    wait_depth(sidecar, full, 3)

    before = dashboard(tmp_path, sidecar.url + "/ui")
    assert before.rows[full]["data-state"] == "flowing"
    assert before.rows[calm]["data-state"] == "flowing"

    broker.publish(full, 5)  # 8 messages: above the stop threshold of 5
    eventually(lambda: flow(sidecar, full)["flowStopped"])
    ours = "/ui?filter=" + quote(full.removeprefix("orders-"))  # this test's queues only
    after = dashboard(tmp_path, sidecar.url + ours)
    assert set(after.rows) == {full, calm}
    assert after.rows[full]["data-state"] == "stopped"
    assert after.rows[calm]["data-state"] == "flowing"
    name, state, depth, _, stops, *_ = after.cells[full]
    assert (name, state, stops) == (full, "stopped", "1")
    assert depth.startswith("8 msg · stop 5 msg · resume 2 msg")
    assert "polyline" in after.tags[full]  # the sparkline got samples from /queues/history

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, sidecar.url + ours, "--window-size=1280,300", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_history_and_front_page_over_http(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("metrics"), THRESHOLDS))
    broker.publish(q, 6)
    eventually(lambda: flow(shared_sidecar, q)["flowStopped"])

    r = shared_sidecar.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {(s.name, s.labels.get("queue")): s.value
               for family in text_string_to_metric_families(r.text) for s in family.samples}
    assert samples[("flow_sidecar_queue_flow_stopped", q)] == 1.0
    assert samples[("flow_sidecar_queue_flow_stopped_total", q)] == 1.0
    assert samples[("flow_sidecar_queue_messages", q)] == 6.0
    assert samples[("flow_sidecar_queue_flow_stop_count", q)] == 5.0
    assert samples[("flow_sidecar_poll_age_seconds", None)] < 5
    assert ("flow_sidecar_webhook_outbox_depth", None) in samples  # the app wires webhooks

    history = shared_sidecar.get("/queues/history", params={"name": q}).json()
    [series] = history["queues"]
    assert series["queue"] == q and series["samples"][-1][1] == 6
    newest = series["samples"][-1][0]
    later = shared_sidecar.get("/queues/history", params={"name": q, "since": newest}).json()
    assert all(t > newest for t, _, _ in later["queues"][0]["samples"])

    front = shared_sidecar.get("/", allow_redirects=False)
    assert front.status_code == 307 and front.headers["location"] == "/ui"
    assert shared_sidecar.get("/ui/app.py").status_code == 404
