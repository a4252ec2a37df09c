"""Requests per second of `GET /flow/{queue}`, against baselines measured in the same run,
and its latency while a dashboard is open and `/metrics` is scraped.

    .venv/bin/python bench/flow_requests.py [--seconds 5] [--connections 50]
        [--latency-connections 10] [--scrape-every 15]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

Baselines, each served on this machine right now under the same load generator (wrk):
- a naive FastAPI route: path params, a dict lookup, a pydantic response model, run by
  the same uvicorn (what "a naive FastAPI route" means in the developers' guide);
- RabbitMQ's own management API for one queue (`/api/queues/%2F/{queue}`).
The sidecar runs as a real `flow-sidecar` process against the target broker (or is the
one `--sidecar-url` names). Then `/flow`'s latency (wrk's p99 and max, with
`--latency-connections`) three ways in the same run: alone; beside a dashboard (one page,
as api/static/dashboard.js asks every second: `/queues` and `/queues/history` paged and
stopped first, `/alarms`, `/vhosts`) and a Prometheus scrape of `/metrics` every
`--scrape-every` seconds (and one at the start); and beside the dashboard as it was (the
unpaged `/queues` and `/queues/history` every second). Needs `wrk` (Debian package) and
the broker from deploy/ensure-rabbitmq.sh unless told another. Prints ratios; asserts
nothing: speed is measured here, never in unit tests.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options  # noqa: E402
from tests.utils.sidecar_process import eventually, free_port

QUEUE = "bench-flow"
NAIVE_APP = textwrap.dedent('''
    from fastapi import FastAPI
    from pydantic import BaseModel

    class Depth(BaseModel):
        messages: int
        bytes: int

    class Flow(BaseModel):
        vhost: str
        queue: str
        flowStopped: bool
        flowStoppedCount: int
        depth: Depth
        thresholds: dict[str, int | None]
        sources: dict[str, str]
        sampledAt: str
        stale: bool
        version: int

    STATE = {("/", "bench-flow"): Flow(
        vhost="/", queue="bench-flow", flowStopped=False, flowStoppedCount=3,
        depth=Depth(messages=120, bytes=4096),
        thresholds={"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500,
                    "qpid.flow_stop_size": None, "qpid.flow_resume_size": None},
        sources={"count": "api", "size": "none"}, sampledAt="2026-11-22T08:00:00Z",
        stale=False, version=17)}
    app = FastAPI()

    @app.get("/flow/{queue}", response_model=Flow)
    def flow(queue: str) -> Flow:
        return STATE[("/", queue)]
''')


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
DASHBOARD = ["/queues?page=1&page_size=50&sort=stopped",
             "/queues/history?page=1&page_size=50&sort=stopped", "/alarms", "/vhosts"]
OLD_DASHBOARD = ["/queues", "/queues/history", "/alarms", "/vhosts"]


def wrk(url: str, seconds: int, connections: int, auth: str | None = None) -> str:
    """wrk's report (non-2xx answers make the run invalid)."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if auth:
        cmd[1:1] = ["-H", f"Authorization: Basic {auth}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"{url} answered errors under load:\n{out}")
    return out


def rate(report: str) -> float:
    return float(re.search(r"Requests/sec:\s+([\d.]+)", report).group(1))  # type: ignore[union-attr]


def milliseconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text).groups()  # type: ignore[union-attr]
    return float(number) * UNITS[unit]


def latency(report: str) -> tuple[float, float]:
    """(p99, max) in milliseconds from wrk's `--latency` report."""
    p99 = re.search(r"99%\s+(\S+)", report).group(1)  # type: ignore[union-attr]
    most = re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", report).group(1)  # type: ignore[union-attr]
    return milliseconds(p99), milliseconds(most)


@contextmanager
def beside(sidecar: str, dashboard: list[str], scrape_every: float | None) -> Iterator[
        Callable[[], str]]:
    """A dashboard polling `dashboard` every second and, with `scrape_every`, a scraper of
    `/metrics`, in threads while the block runs; yields what they did, in words."""
    stop = threading.Event()
    done = {"refreshes": 0, "scrapes": 0}
    slowest = {"refresh": 0.0, "scrape": 0.0}

    def poll(paths: list[str], every: float, what: str, count: str) -> None:
        session = requests.Session()
        session.headers["Accept-Encoding"] = "gzip"
        while not stop.is_set():
            started = time.monotonic()
            for path in paths:
                session.get(sidecar + path, timeout=60).raise_for_status()
            took = time.monotonic() - started
            slowest[what] = max(slowest[what], took)
            done[count] += 1
            stop.wait(max(0.0, every - took))

    threads = [threading.Thread(target=poll, args=(dashboard, 1.0, "refresh", "refreshes"))]
    if scrape_every:
        threads.append(threading.Thread(target=poll, args=(["/metrics"], scrape_every,
                                                           "scrape", "scrapes")))
    for thread in threads:
        thread.start()
    try:
        yield lambda: (f"{done['refreshes']} refreshes (slowest {slowest['refresh']:.2f} s), "
                       f"{done['scrapes']} scrapes (slowest {slowest['scrape']:.2f} s)")
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--latency-connections", type=int, default=10)
    parser.add_argument("--scrape-every", type=float, default=15.0)
    add_target_options(parser)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk: apt-get install -y wrk")
    target = Target.from_args(args)
    login = base64.b64encode(f"{target.user}:{target.password}".encode()).decode()

    channel = target.channel()
    channel.queue_declare(QUEUE, arguments={"qpid.flow_stop_count": 900,
                                            "qpid.flow_resume_count": 500})
    work = Path(tempfile.mkdtemp(prefix="bench-flow-"))
    (work / "naive_app.py").write_text(NAIVE_APP)
    port = free_port()
    naive = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "naive_app:app", "--port", str(port),
         "--log-level", "warning", "--no-access-log"], cwd=work, env={**os.environ})
    latencies: dict[str, tuple[float, float, str]] = {}
    try:
        with target.sidecar(prefix="bench-flow-") as running:
            sidecar = running.url
            eventually(lambda: requests.get(f"http://127.0.0.1:{port}/flow/{QUEUE}").ok)
            eventually(lambda: requests.get(f"{sidecar}/flow/{QUEUE}").ok, timeout=120)
            time.sleep(1)
            reports = {
                "naive FastAPI route": wrk(f"http://127.0.0.1:{port}/flow/{QUEUE}",
                                           args.seconds, args.connections),
                "RabbitMQ management API, one queue": wrk(
                    f"{target.management_url}/api/queues/%2F/{QUEUE}", args.seconds,
                    args.connections, auth=login),
                "flow-sidecar GET /flow/{queue}": wrk(f"{sidecar}/flow/{QUEUE}",
                                                      args.seconds, args.connections),
                "flow-sidecar GET /flow/{vhost}/{queue}": wrk(
                    f"{sidecar}/flow/%2F/{QUEUE}", args.seconds, args.connections),
            }
            queues = requests.get(f"{sidecar}/queues?page=1&page_size=1",
                                  timeout=60).json()["total_count"]
            flow_url = f"{sidecar}/flow/{QUEUE}"
            for name, dashboard, scrape in (
                    ("alone", None, None),
                    ("dashboard open, /metrics scraped", DASHBOARD, args.scrape_every),
                    ("unpaged dashboard as before", OLD_DASHBOARD, None)):
                if dashboard is None:
                    report, what = wrk(flow_url, args.seconds, args.latency_connections), ""
                else:
                    with beside(sidecar, dashboard, scrape) as did:
                        report = wrk(flow_url, args.seconds, args.latency_connections)
                        what = did()
                latencies[name] = (*latency(report), what)
    finally:
        naive.terminate()
        channel.queue_delete(QUEUE)
        channel.connection.close()
    rates = {name: rate(report) for name, report in reports.items()}
    base = rates["naive FastAPI route"]
    print(f"{'server':42} {'req/s':>10} {'vs naive':>9}")
    for name, value in rates.items():
        print(f"{name:42} {value:10.0f} {value / base:8.2f}x")
    alone = latencies["alone"][0]
    print(f"\nGET /flow latency, {args.latency_connections} connections, {queues} queues:")
    for name, (p99, most, what) in latencies.items():
        print(f"{name:34} p99 {p99:7.2f} ms  max {most:8.2f} ms  p99 vs alone "
              f"{p99 / alone:5.1f}x  {what}")


if __name__ == "__main__":
    main()
