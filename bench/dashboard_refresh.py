"""Bytes and time of the dashboard's refresh in a real headless Chromium, against what the
unpaged listings it read before cost in the same run.

    .venv/bin/python bench/dashboard_refresh.py [--declare 0] [--seconds 10]
        [--screenshot docs/dashboard.png] [--management-url URL ...] [--sidecar-url URL]

Opens `/ui` (one page of 50 queues, stopped first) in Chromium driven over WebDriver
(tests/utils/webdriver.py; deploy/ensure-chromium.sh installs it), lets it refresh for
`--seconds`, and reads from the page's own Performance entries what each refresh
transferred (gzip, as the browser asks) and how long its requests took. Baseline: the
unpaged `GET /queues` and `GET /queues/history` a refresh read before, fetched now with
and without gzip. `--declare N` first declares N queues on the broker (and deletes them
after); without it the broker's own queues are shown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options  # noqa: E402
from tests.utils.webdriver import chromium

PAGE_REQUESTS = """
return performance.getEntriesByType("resource")
  .filter((e) => /\\/(queues|alarms|vhosts)/.test(e.name))
  .map((e) => ({url: e.name, bytes: e.transferSize, body: e.decodedBodySize,
                ms: e.duration, start: e.startTime}));
"""
ROWS = "return document.querySelectorAll('#queues tbody tr').length;"


def declare(target: Target, count: int) -> None:
    channel = target.channel()
    for i in range(count):
        arguments = {"qpid.flow_stop_count": 5} if i % 3 == 0 else {}
        channel.queue_declare(f"bench-dash.{i:05d}", arguments=arguments)
    channel.connection.close()


def delete(target: Target, count: int) -> None:
    channel = target.channel()
    for i in range(count):
        channel.queue_delete(f"bench-dash.{i:05d}")
    channel.connection.close()


def refreshes(entries: list[dict[str, float | str]]) -> list[tuple[float, float]]:
    """(bytes transferred, slowest request in ms) of each refresh: the requests between two
    `/queues?` requests."""
    out: list[tuple[float, float]] = []
    for entry in sorted(entries, key=lambda e: float(e["start"])):
        if "/queues?" in str(entry["url"]):
            out.append((0.0, 0.0))
        if out:
            total, slowest = out[-1]
            out[-1] = (total + float(entry["bytes"]), max(slowest, float(entry["ms"])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--declare", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--screenshot", type=Path, default=None)
    add_target_options(parser)
    args = parser.parse_args()
    target = Target.from_args(args)
    declare(target, args.declare)
    try:
        with target.sidecar(prefix="bench-dash-") as running:
            url = running.url
            queues = len(requests.get(f"{url}/queues?page=1&page_size=1", timeout=60)
                         .json()["items"]) and requests.get(
                f"{url}/queues?page=1&page_size=1", timeout=60).json()["total_count"]
            baseline = {}
            for path in ("/queues", "/queues/history"):
                for coding in ("identity", "gzip"):
                    started = time.perf_counter()
                    answer = requests.get(url + path, headers={"Accept-Encoding": coding},
                                          timeout=120, stream=True)
                    size = len(answer.raw.read())
                    baseline[(path, coding)] = (size, time.perf_counter() - started)
            with chromium(Path(tempfile.mkdtemp(prefix="bench-dash-chromium-")),
                          "--window-size=1280,900", "--hide-scrollbars") as browser:
                browser.open(url + "/ui")
                deadline = time.monotonic() + 60
                while not browser.run(ROWS):
                    if time.monotonic() > deadline:
                        raise SystemExit("the dashboard showed no rows within 60 s")
                    time.sleep(0.2)
                time.sleep(args.seconds)
                measured = refreshes(browser.run(PAGE_REQUESTS))
                rows = browser.run(ROWS)
                if args.screenshot:
                    args.screenshot.write_bytes(browser.screenshot())
    finally:
        if args.declare:
            delete(target, args.declare)
    first, steady = measured[0], measured[1:-1] or measured[1:]
    kb = 1024.0
    old = sum(baseline[(p, "identity")][0] for p in ("/queues", "/queues/history"))
    old_gz = sum(baseline[(p, "gzip")][0] for p in ("/queues", "/queues/history"))
    print(f"queues: {queues}, rows shown: {rows}, refreshes measured: {len(measured)}")
    for (path, coding), (size, took) in baseline.items():
        print(f"baseline unpaged {path} ({coding}): {size / kb:,.0f} KiB in {took * 1000:.0f} ms")
    print(f"dashboard first load: {first[0] / kb:.1f} KiB (slowest request {first[1]:.0f} ms)")
    median_bytes = statistics.median(b for b, _ in steady)
    print(f"dashboard refresh: median {median_bytes / kb:.1f} KiB, max "
          f"{max(b for b, _ in steady) / kb:.1f} KiB; slowest request median "
          f"{statistics.median(ms for _, ms in steady):.0f} ms")
    print(f"ratio unpaged refresh / paged refresh: {old / median_bytes:.0f}x plain, "
          f"{old_gz / median_bytes:.0f}x gzip")


if __name__ == "__main__":
    main()
