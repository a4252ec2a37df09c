"""Wake-up latency of N long-poll waiters, or N SSE streams, on one queue, against one in
the same run.

    .venv/bin/python bench/longpoll_wakeup.py [--waiters 1000] [--rounds 3] [--sse]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

N raw HTTP/1.1 connections park `GET /flow/{queue}?since=V&wait=60` (or, with `--sse`,
stream `GET /events?queue={queue}`) in a real flow-sidecar process; a `PUT` of new
thresholds then stops the queue (it holds two messages; the stop moves from 1000 to 1, and
back between measurements). Latency is the time from sending the PUT to each connection's
first byte of the answer (or of the `flow` event). The baseline is the same measurement
with one connection. The client is one asyncio process with a bare Protocol per
connection, on the same machine: its own reading is part of what is measured.
Both processes need N open files: the bench lifts its soft limit (the sidecar it starts
inherits it; flow-sidecar lifts its own to the hard limit) and prints both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options, raise_fd_limit  # noqa: E402

QUEUE = "bench-longpoll"
CONNECT_BATCH = 500


class Waiter(asyncio.Protocol):
    """One connection: sends its request, notes when the awaited bytes arrive."""

    def __init__(self, request: bytes, marker: bytes | None) -> None:
        self.request = request
        self.marker = marker  # None: any answer; else wait for these bytes (an SSE event)
        self.seen = b""
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()  # the request is parked in the sidecar
        self.arrived = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]
        if self.marker is None:
            self.ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if self.marker is None:
            if not self.arrived.done():
                self.arrived.set_result(now)
            return
        self.seen = (self.seen + data)[-4096:]
        if not self.ready.done() and b": ready" in self.seen:
            self.ready.set_result(None)
            self.seen = b""
        elif self.ready.done() and self.marker in self.seen and not self.arrived.done():
            self.arrived.set_result(now)

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.ready, self.arrived):
            if not future.done():
                future.set_exception(ConnectionError(f"closed early: {exc}"))


async def open_all(host: str, port: int, count: int, request: bytes,
                   marker: bytes | None) -> list[Waiter]:
    """`count` connections, opened a batch at a time, each parked in the sidecar."""
    loop = asyncio.get_running_loop()
    waiters: list[Waiter] = []
    for start in range(0, count, CONNECT_BATCH):
        batch = [Waiter(request, marker) for _ in range(min(CONNECT_BATCH, count - start))]
        await asyncio.gather(*(loop.create_connection(lambda w=w: w, host, port)
                               for w in batch))
        await asyncio.gather(*(w.ready for w in batch))
        waiters += batch
    return waiters


def set_stop(sidecar: str, stop: int) -> None:
    answer = requests.put(f"{sidecar}/queues/%2F/{QUEUE}/flow",
                          json={"qpid.flow_stop_count": stop}, timeout=30)
    answer.raise_for_status()


def released(sidecar: str) -> None:
    """Move the stop back above the depth and wait until producers are told to go: a
    release waits for a fresh depth (the sidecar never releases on a guess), so only
    stops are timed."""
    set_stop(sidecar, 1000)
    deadline = time.monotonic() + 60
    while requests.get(f"{sidecar}/flow/{QUEUE}", timeout=10).json()["flowStopped"]:
        if time.monotonic() > deadline:
            raise SystemExit("the queue was not released within 60 s")
        time.sleep(0.1)


async def round_of(sidecar: str, count: int, sse: bool) -> list[float]:
    """Park `count` connections, stop the queue, return each connection's latency."""
    await asyncio.to_thread(released, sidecar)
    url = urlsplit(sidecar)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    if sse:
        path, marker = f"/events?queue={QUEUE}", b"event: flow"
    else:
        answer = await asyncio.to_thread(requests.get, f"{sidecar}/flow/{QUEUE}", timeout=10)
        version = answer.json()["version"]
        path, marker = f"/flow/{QUEUE}?since={version}&wait=60", None
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
               .encode())
    waiters = await open_all(host, port, count, request, marker)
    await asyncio.sleep(0.5 + count / 5000)  # the last requests reach their wait
    sent = time.monotonic()
    await asyncio.to_thread(set_stop, sidecar, 1)
    arrived = await asyncio.wait_for(asyncio.gather(*(w.arrived for w in waiters)), 60)
    for waiter in waiters:
        waiter.transport.close()
    return [t - sent for t in arrived]


def wait_for_depth(sidecar: str, messages: int) -> None:
    deadline = time.monotonic() + 60
    while (requests.get(f"{sidecar}/flow/{QUEUE}", timeout=5).json().get("depth")
           or {}).get("messages") != messages:
        if time.monotonic() > deadline:
            raise SystemExit(f"the sidecar never saw the queue's {messages} messages")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sse", action="store_true", help="SSE streams instead of long polls")
    add_target_options(parser)
    args = parser.parse_args()
    target = Target.from_args(args)
    limit = raise_fd_limit(args.waiters)
    channel = target.channel()
    channel.queue_declare(QUEUE, arguments={"qpid.flow_stop_count": 1000})
    channel.queue_purge(QUEUE)
    for _ in range(2):
        channel.basic_publish("", QUEUE, b"m")
    kind = "SSE streams" if args.sse else "long-poll waiters"
    try:
        with target.sidecar(prefix="bench-lp-") as running:
            files = running.open_files()
            wait_for_depth(running.url, 2)
            single, many = [], []
            for _ in range(args.rounds):
                single += asyncio.run(round_of(running.url, 1, args.sse))
                many += asyncio.run(round_of(running.url, args.waiters, args.sse))
            set_stop(running.url, 1000)
    finally:
        channel.queue_delete(QUEUE)
        channel.connection.close()
    ms = 1000.0
    p50, p99 = statistics.median(many), statistics.quantiles(many, n=100)[98]
    print(f"open files: bench {limit}, sidecar {files}")
    print(f"one of the {kind}: median {statistics.median(single) * ms:.1f} ms")
    print(f"{args.waiters} {kind}: median {p50 * ms:.1f} ms, p99 {p99 * ms:.1f} ms, "
          f"max {max(many) * ms:.1f} ms (all woken: {len(many)} of "
          f"{args.waiters * args.rounds})")
    print(f"ratio median {args.waiters} / one: {p50 / statistics.median(single):.1f}")


if __name__ == "__main__":
    main()
