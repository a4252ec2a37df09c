"""The dashboard in a real headless Chromium, and /metrics over HTTP, against a real
sidecar process and the real RabbitMQ.

One Chromium page (driven over WebDriver by tests/utils/webdriver.py) opens `/ui` and stays
open, never reloaded, while the broker fills a queue past its stop threshold; the test waits
until that same page's own refresh marks the row stopped, then checks the computed colours
(what an operator sees: a red state badge, a red-tinted row) and screenshots the live page
into artifacts/dashboard.png.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webdriver import Browser, chromium

Names = Callable[[str], str]
Row = dict[str, Any]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
THRESHOLDS: dict[str, object] = {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2}
LIVE_WAIT = 20.0  # seconds; the page polls every second and the sidecar every 0.2 s
MARK = "set-once-after-load"  # a window property: a reload or navigation would drop it

# What the open page shows for one queue's row: attributes, cell texts, computed colours.
ROW_JS = """
const tr = [...document.querySelectorAll("#queues tbody tr")]
  .find((row) => row.dataset.queue === arguments[0]);
if (!tr) return null;
const css = (node) => getComputedStyle(node);
const badge = tr.querySelector(".state");
const line = tr.querySelector("svg.spark polyline");
return {
  state: tr.dataset.state,
  cells: [...tr.cells].map((td) => td.textContent),
  rowBackground: css(tr).backgroundColor,
  badgeBackground: css(badge).backgroundColor,
  badgeColor: css(badge).color,
  nameStripe: css(tr.cells[0]).boxShadow,
  sparkPoints: line ? (line.getAttribute("points") || "").trim().split(/\\s+/).filter(Boolean).length : 0,
  sparkStroke: line ? css(line).stroke : null,
  mark: window.testMark ?? null,
};
"""


def rgba(css: str) -> tuple[float, float, float, float]:
    """The first `rgb(...)`/`rgba(...)` in a computed style value."""
    found = re.search(r"rgba?\(([^)]*)\)", css)
    assert found, f"no colour in {css!r}"
    r, g, b, *alpha = (float(part) for part in re.split(r"[\s,/]+", found.group(1).strip()))
    return r, g, b, alpha[0] if alpha else 1.0


def red(css: str) -> bool:
    """Plainly red: the state badge, the stripe and the sparkline of a stopped queue."""
    r, g, b, a = rgba(css)
    return a > 0 and r >= 150 and g <= 100 and b <= 100


def red_tinted(css: str) -> bool:
    """A pale red background (the stopped row), visibly not white or grey."""
    r, g, b, a = rgba(css)
    return a > 0 and r - max(g, b) >= 10


def green(css: str) -> bool:
    r, g, b, a = rgba(css)
    return a > 0 and g > r + 30 and g > b + 30


def transparent(css: str) -> bool:
    return rgba(css)[3] == 0


def row(browser: Browser, queue: str) -> Row | None:
    shown: Row | None = browser.run(ROW_JS, queue)
    return shown


def wait_row(browser: Browser, queue: str, until: Callable[[Row], bool], what: str,
             sidecar: SidecarProcess) -> Row:
    """Poll the open page (no reload) until `queue`'s row satisfies `until`; fail clearly."""
    seen: list[Row | None] = [None]

    def check() -> Row | None:
        seen[0] = row(browser, queue)
        return seen[0] if seen[0] is not None and until(seen[0]) else None

    try:
        shown: Row = eventually(check, timeout=LIVE_WAIT, interval=0.1)
        return shown
    except AssertionError:
        pass  # fail below, outside the except, so the report is this message alone
    pytest.fail(f"the open dashboard page did not show {what} for {queue} within "
                f"{LIVE_WAIT:.0f}s without a reload; the sidecar answers "
                f"flowStopped={flow(sidecar, queue)['flowStopped']}; last row seen: {seen[0]}")


def test_dashboard_marks_a_queue_stopped_live_in_an_open_page(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names,
    tmp_path: Path
) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    full = known(sidecar, broker.declare(qname("orders"), THRESHOLDS))
    calm = known(sidecar, broker.declare(qname("calm"), THRESHOLDS))
    broker.publish(full, 3)
    wait_depth(sidecar, full, 3)
    ours = "/ui?filter=" + quote(full.removeprefix("orders-"))  # this test's queues only

    with chromium(tmp_path, "--window-size=1280,400", "--hide-scrollbars") as browser:
        browser.open(sidecar.url + ours)
        browser.run("window.testMark = arguments[0];", MARK)
        before = wait_row(browser, full, lambda r: r["cells"][2].startswith("3 msg"),
                          "a depth of 3 messages", sidecar)
        assert before["state"] == "flowing"
        assert green(before["badgeColor"]), before  # green "flowing" text
        assert transparent(before["rowBackground"]), before

        broker.publish(full, 5)  # 8 messages: above the stop threshold of 5
        after = wait_row(browser, full, lambda r: r["state"] == "stopped",
                         'data-state="stopped"', sidecar)
        # what a person sees: a red badge with white text, a red-tinted row, a red stripe
        assert red(after["badgeBackground"]), after
        assert rgba(after["badgeColor"])[:3] == (255, 255, 255), after
        assert red_tinted(after["rowBackground"]), after
        assert red(after["nameStripe"]), after
        assert after["mark"] == MARK, "the page was reloaded: the update must be live"

        settled = wait_row(browser, full, lambda r: r["cells"][2].startswith("8 msg"),
                           "a depth of 8 messages", sidecar)
        name, state, depth, _, stops, *_ = settled["cells"]
        assert (name, state, stops) == (full, "stopped", "1")
        assert depth.startswith("8 msg · stop 5 msg · resume 2 msg")
        assert settled["cells"][3].endswith("warning")  # 8 >= 90 % of its stop of 5
        # the sparkline got samples from /queues/history, and turned red with the row
        assert settled["sparkPoints"] >= 2 and red(settled["sparkStroke"]), settled

        # stopped first (by name "calm-..." comes before "orders-..."), one page, asked of
        # the sidecar: the page never fetches the whole unpaged listing
        order = browser.run("return [...document.querySelectorAll('#queues tbody tr')]"
                            ".map((tr) => tr.dataset.queue);")
        assert order == [full, calm], order
        asked = browser.run("return performance.getEntriesByType('resource')"
                            ".map((e) => new URL(e.name).pathname + new URL(e.name).search);")
        assert any(a.startswith("/queues?page=1&page_size=50&sort=stopped") for a in asked)
        assert any(a.startswith("/queues/history?page=1&page_size=50") for a in asked)
        assert "/queues" not in asked and "/queues/history" not in asked, asked
        assert browser.run("return document.getElementById('page-of').textContent;") == \
            "page 1 of 1"

        other = row(browser, calm)
        assert other is not None and other["state"] == "flowing", other
        assert green(other["badgeColor"]), other
        assert transparent(other["rowBackground"]), other
        assert settled["mark"] == MARK, "the page was reloaded: the update must be live"

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        shot.unlink(missing_ok=True)
        shot.write_bytes(browser.screenshot())  # the same live page, as it is now
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

    # the stop may come from a live sample before the statistics (the history) show 6
    history = eventually(lambda: (h := shared_sidecar.get(
        "/queues/history", params={"name": q}).json())["queues"][0]["samples"]
        and h["queues"][0]["samples"][-1][1] == 6 and h)
    [series] = history["queues"]
    assert series["queue"] == q
    newest = series["samples"][-1][0]
    later = shared_sidecar.get("/queues/history", params={"name": q, "since": newest}).json()
    assert all(t > newest for t, _, _ in later["queues"][0]["samples"])

    front = shared_sidecar.get("/", allow_redirects=False)
    assert front.status_code == 307 and front.headers["location"] == "/ui"
    assert shared_sidecar.get("/ui/app.py").status_code == 404
