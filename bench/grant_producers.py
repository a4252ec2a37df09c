"""Many distinct producers asking for credit: the sidecar's memory and `/flow` latency.

    .venv/bin/python bench/grant_producers.py [--producers 10000] [--threads 8]

A real flow-sidecar process (lease 3 s, lease max 30 s) and one queue with a stop of
10,000,000 messages on the main broker. `--producers` distinct `X-Producer-Id`s ask once
each for 10 messages (no release: every grant lives out its lease), from `--threads`
threads, while another thread reads `GET /flow` of the queue back to back. Printed: the
sidecar's resident memory (VmRSS) before, right after the asks and once the leases are
over and a poll has settled them (the ledger forgets them), and `/flow` p50/p99 during the
asks against a baseline measured in the same run before them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

LEASE = 3.0


def rss_mb(pid: int) -> float:
    """The process's resident memory in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def flow_latencies(port: int, path: str, stop: threading.Event) -> list[float]:
    """Milliseconds of each `GET path` until `stop`, over one kept-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    taken = []
    while not stop.is_set():
        start = time.perf_counter()
        conn.request("GET", path)
        conn.getresponse().read()
        taken.append((time.perf_counter() - start) * 1000)
    conn.close()
    return taken


def ask_all(port: int, path: str, ids: list[str], granted: list[int]) -> None:
    """Each id asks once for 10 messages."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"messages": 10, "bytes": 1000})
    for producer in ids:
        conn.request("POST", path, body, {"Content-Type": "application/json",
                                           "X-Producer-Id": producer})
        answer = json.loads(conn.getresponse().read())
        granted.append(answer["messages"])
    conn.close()


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def timed_flow(port: int, path: str, seconds: float) -> list[float]:
    stop = threading.Event()
    box: list[list[float]] = []
    t = threading.Thread(target=lambda: box.append(flow_latencies(port, path, stop)))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return box[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--producers", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    sidecar = SidecarProcess(Path(tempfile.mkdtemp()), "--poll-interval", "1.0",
                             "--grant-lease", str(LEASE), "--no-live-depth",
                             "--log-level", "WARNING").start()
    connection = pika.BlockingConnection()
    channel = connection.channel()
    queue = f"grant-producers-{int(time.time())}"
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": 10_000_000})
    try:
        flow_path, grant_path = f"/flow/%2F/{queue}", f"/grants/%2F/{queue}"
        eventually(lambda: sidecar.get(flow_path).status_code == 200, timeout=30)
        assert sidecar.proc is not None
        pid = sidecar.proc.pid
        baseline = timed_flow(sidecar.port, flow_path, 5.0)
        before = rss_mb(pid)
        ids = [f"bench-producer-{i}" for i in range(args.producers)]
        granted: list[int] = []
        stop = threading.Event()
        during: list[list[float]] = []
        reader = threading.Thread(target=lambda: during.append(
            flow_latencies(sidecar.port, flow_path, stop)))
        reader.start()
        started = time.monotonic()
        askers = [threading.Thread(target=ask_all, args=(
            sidecar.port, grant_path, ids[i::args.threads], granted))
            for i in range(args.threads)]
        for t in askers:
            t.start()
        for t in askers:
            t.join()
        took = time.monotonic() - started
        stop.set()
        reader.join()
        after = rss_mb(pid)
        view = sidecar.get(grant_path).json()
        time.sleep(LEASE + 2 + 2.5)  # leases over, the stats lag, a poll or two
        settled = rss_mb(pid)
        later = sidecar.get(grant_path).json()
        print(f"{args.producers:,} distinct producers asked once each in {took:.1f} s "
              f"({args.producers / took:,.0f} asks/s, {sum(granted):,} messages granted, "
              f"{sum(1 for g in granted if g):,} grants)")
        print(f"sidecar RSS: {before:.1f} MB before, {after:.1f} MB after the asks "
              f"(+{after - before:.1f} MB; ledger held {view['held']['grants']:,} grants, "
              f"{len(view['producers']):,} active producers), {settled:.1f} MB once the "
              f"leases were over (ledger: {later['held']['grants']} grants, "
              f"{len(later['producers'])} producers)")
        for name, values in (("baseline (before the asks)", baseline),
                             ("during the asks", during[0])):
            print(f"GET /flow {name}: {len(values):,} requests, p50 "
                  f"{percentile(values, 50):.2f} ms, p99 {percentile(values, 99):.2f} ms")
        print(f"p99 ratio during / baseline: "
              f"{percentile(during[0], 99) / percentile(baseline, 99):.2f}x")
    finally:
        channel.queue_delete(queue)
        connection.close()
        sidecar.stop()


if __name__ == "__main__":
    main()
