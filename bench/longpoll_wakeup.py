"""Wake-up latency of N long-poll waiters on one queue, against one waiter in the same run.

    .venv/bin/python bench/longpoll_wakeup.py [--waiters 1000] [--rounds 3]

N raw HTTP/1.1 connections park `GET /flow/{queue}?since=V&wait=60` in a real flow-sidecar
process; a `PUT` of new thresholds then changes the queue's answer. Latency is the time from
the PUT's answer to each waiter's answer. The baseline is the same measurement with a
single waiter. Uses the real broker for the queue (deploy/ensure-rabbitmq.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

QUEUE = "bench-longpoll"


async def request(port: int, method: str, path: str, body: bytes = b"") -> bytes:
    """One HTTP/1.1 request on a fresh connection; the response body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}"
                 "\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".encode()
                 + body)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data.split(b"\r\n\r\n", 1)[1]


def threads_of(pid: int) -> int:
    """The process's thread count, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no thread count for pid {pid}")


async def round_of(port: int, waiters: int, stop: int,
                   parked: list[int] | None = None, pid: int = 0) -> list[float]:
    """Park `waiters` long polls, change the queue, return each waiter's latency (and note
    the sidecar's thread count while they are parked in `parked`)."""
    version = json.loads(await request(port, "GET", f"/flow/{QUEUE}"))["version"]
    arrived: list[float] = []

    async def wait_one() -> None:
        await request(port, "GET", f"/flow/{QUEUE}?since={version}&wait=60")
        arrived.append(time.monotonic())

    tasks = [asyncio.create_task(wait_one()) for _ in range(waiters)]
    await asyncio.sleep(1.0 + waiters / 500)  # every request parked in the service
    if parked is not None:
        parked.append(threads_of(pid))
    await request(port, "PUT", f"/queues/%2F/{QUEUE}/flow",
                  json.dumps({"qpid.flow_stop_count": stop}).encode())
    changed = time.monotonic()
    await asyncio.gather(*tasks)
    return [max(0.0, t - changed) for t in arrived]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.waiters + 256)),
                                                hard))
    channel = pika.BlockingConnection().channel()
    channel.queue_declare(QUEUE)
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-lp-"))).start()
    assert sidecar.proc is not None
    parked: list[int] = []
    try:
        eventually(lambda: sidecar.get(f"/flow/{QUEUE}").ok)
        idle_threads = threads_of(sidecar.proc.pid)
        single, many = [], []
        for i in range(args.rounds):
            single += asyncio.run(round_of(sidecar.port, 1, 1000 + 2 * i))
            many += asyncio.run(round_of(sidecar.port, args.waiters, 1001 + 2 * i, parked,
                                         sidecar.proc.pid))
    finally:
        sidecar.stop()
        channel.queue_delete(QUEUE)
        channel.connection.close()
    ms = 1000.0
    p50 = statistics.median(many)
    p99 = statistics.quantiles(many, n=100)[98]
    print(f"one waiter:        median {statistics.median(single) * ms:.1f} ms")
    print(f"{args.waiters} waiters: median {p50 * ms:.1f} ms, p99 {p99 * ms:.1f} ms, "
          f"max {max(many) * ms:.1f} ms (all woken: {len(many)} of "
          f"{args.waiters * args.rounds})")
    print(f"ratio median {args.waiters} / one: {p50 / statistics.median(single):.1f}")
    print(f"sidecar threads: {idle_threads} idle, at most {max(parked)} with {args.waiters} "
          "waiters parked")


if __name__ == "__main__":
    main()
