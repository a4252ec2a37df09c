"""`GET /flow` latency while large bodies are being written, against the same without them.

    .venv/bin/python bench/flow_under_large_writes.py [--seconds 10] [--writers 2] [--mb 10]

A real `flow-sidecar` process on loopback serves one queue of the real broker. A sampler
asks `GET /flow/{queue}` back to back on one keep-alive connection and records each
answer's latency: first alone (the baseline), then while `--writers` threads keep sending
`PUT /queues/%2F/{queue}/flow` with bodies of `--mb` MB, half an object of unknown keys
(`{"k0":1,"k1":1,...}`), half an array of integers: the two shapes that froze the event
loop before bodies were limited. Prints p50/p99/max of both phases, their ratio, what the
writes were answered and the sidecar's resident memory. Asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402 (after sys.path)


def bodies(megabytes: int) -> list[bytes]:
    """An object of unknown keys and an array of ints, each about `megabytes` MB."""
    keys = megabytes * 1024 * 1024 // 11
    unknown = ("{" + ",".join(f'"k{i}":1' for i in range(keys)) + "}").encode()
    ints = ("[" + ",".join(str(i) for i in range(keys)) + "]").encode()
    return [unknown, ints]


def sample(port: int, path: str, seconds: float) -> list[float]:
    """Latencies (s) of back-to-back GETs of `path` for `seconds` on one connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    out: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        out.append(time.perf_counter() - started)
        if response.status != 200:
            raise SystemExit(f"GET {path} answered {response.status}")
    conn.close()
    return out


class Writer(threading.Thread):
    """Sends large PUTs until stopped; records each answer's status, size and time."""

    def __init__(self, port: int, path: str, payloads: list[bytes], stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.path, self.payloads, self.stop = port, path, payloads, stop
        self.results: list[tuple[str, int, float]] = []  # (status, answer bytes, seconds)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            body = self.payloads[n % len(self.payloads)]
            n += 1
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            started = time.perf_counter()
            try:
                conn.request("PUT", self.path, body=body,
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = response.read()
                self.results.append((str(response.status), len(answer),
                                     time.perf_counter() - started))
            except OSError as exc:  # the server may close as soon as it has said 413
                self.results.append((type(exc).__name__, 0, time.perf_counter() - started))
            finally:
                conn.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def describe(name: str, latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    row = {"p50": statistics.median(ms), "p99": ms[int(len(ms) * 0.99) - 1] if ms else 0,
           "max": ms[-1]}
    print(f"{name:34} {len(ms):7d} {row['p50']:9.2f} {row['p99']:9.2f} {row['max']:10.1f}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--mb", type=int, default=10)
    args = parser.parse_args()

    queue = f"bench-large-{uuid.uuid4().hex[:8]}"
    channel = pika.BlockingConnection().channel()
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": 900})
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-large-")) / "sidecar").start()
    try:
        eventually(lambda: sidecar.get(f"/flow/{queue}").ok)
        payloads = bodies(args.mb)
        assert sidecar.proc is not None
        rss_before = rss_mb(sidecar.proc.pid)
        print(f"{'/flow latency (ms)':34} {'samples':>7} {'p50':>9} {'p99':>9} {'max':>10}")
        alone = describe("alone", sample(sidecar.port, f"/flow/{queue}", args.seconds))

        stop = threading.Event()
        writers = [Writer(sidecar.port, f"/queues/%2F/{queue}/flow", payloads, stop)
                   for _ in range(args.writers)]
        for w in writers:
            w.start()
        loaded = describe(f"while {args.writers} writers send {args.mb} MB",
                          sample(sidecar.port, f"/flow/{queue}", args.seconds))
        stop.set()
        for w in writers:
            w.join(180)
        rss_after = rss_mb(sidecar.proc.pid)
    finally:
        sidecar.stop()
        channel.queue_delete(queue)
        channel.connection.close()

    print(f"ratio under load / alone: p50 {loaded['p50'] / alone['p50']:.2f}x, "
          f"p99 {loaded['p99'] / alone['p99']:.2f}x")
    results = [r for w in writers for r in w.results]
    statuses: dict[str, int] = {}
    for status, _, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    if results:
        print(f"large writes: {len(results)} answered {statuses}; answer time median "
              f"{statistics.median(r[2] for r in results) * 1000:.1f} ms, max "
              f"{max(r[2] for r in results) * 1000:.1f} ms; largest answer "
              f"{max(r[1] for r in results):,} bytes")
    print(f"sidecar resident memory: {rss_before:.0f} MB before, {rss_after:.0f} MB after")


if __name__ == "__main__":
    main()
