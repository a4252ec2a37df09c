"""Wake-up latency of N long-poll waiters, or N SSE streams, on one queue, against one in
the same run.

    .venv/bin/python bench/longpoll_wakeup.py [--waiters 1000] [--rounds 3] [--sse] [--clients 2]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

N raw HTTP/1.1 connections park `GET /flow/{queue}?since=V&wait=60` (or, with `--sse`,
stream `GET /events?queue={queue}`) in a real flow-sidecar process; a `PUT` of new
thresholds then stops the queue (it holds two messages; the stop moves from 1000 to 1, and
back between measurements). Latency is the time from sending the PUT to each connection's
first byte of the answer (or of the `flow` event). The baseline is the same measurement
with one connection. The connections are shared between `--clients` processes (2) that
read them with a bare epoll loop, on the same machine: their reading is part of what is
measured, so the bench also prints the sidecar's own span from the change to its last
write (`/healthz` `wakeups`, where the sidecar reports it).

The floor, in the same run: the same number of connections, read by the same client
processes, but accepted by the bench itself, which writes each an answer of the same size
in a bare loop of `send` (no HTTP server, no event loop): the least any server on this
machine can do for N connections, each needing its own write.
Both processes need N open files: the bench lifts its soft limit (the sidecar it starts
inherits it; flow-sidecar lifts its own to the hard limit) and prints both.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import selectors
import socket
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options, raise_fd_limit  # noqa: E402

QUEUE = "bench-longpoll"
Span = tuple[float, float]  # the sidecar's wall and CPU seconds from the change to its last write


def park(host: str, port: int, count: int, request: bytes,
         marker: bytes | None) -> list[socket.socket]:
    """`count` connections, each with its request parked in the sidecar (an SSE stream
    once it has sent `: ready`), non-blocking."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port))
        sock.sendall(request)
        socks.append(sock)
    if marker is not None:
        for sock in socks:
            seen = b""
            while b": ready" not in seen:
                seen = (seen + sock.recv(65536))[-4096:]
    for sock in socks:
        sock.setblocking(False)
    return socks


def receive(socks: list[socket.socket], marker: bytes | None, timeout: float) -> list[float]:
    """When each connection received its answer (any byte) or `marker`, by a bare epoll
    loop: the cheapest reader, so that what is timed is the sidecar."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_READ, [b""])
    arrived: list[float] = []
    deadline = time.monotonic() + timeout
    while len(arrived) < len(socks) and time.monotonic() < deadline:
        for key, _ in selector.select(1.0):
            data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            now = time.monotonic()
            seen = key.data[0] + data
            if marker is None or marker in seen or not data:
                arrived.append(now if data else math.inf)
                selector.unregister(key.fileobj)
            else:
                key.data[0] = seen[-4096:]
    return arrived


def client(host: str, port: int, count: int, request: bytes, marker: bytes | None,
           pipe: Connection) -> None:
    """One client process: park `count` connections, say so, send back arrival times."""
    socks = park(host, port, count, request, marker)
    pipe.send("parked")
    pipe.send(receive(socks, marker, 60))
    for sock in socks:
        sock.close()


def clients_parked(host: str, port: int, count: int, request: bytes, marker: bytes | None,
                   clients: int) -> tuple[list[Connection], list[multiprocessing.Process]]:
    """`clients` processes that park `count` connections between them (they say "parked"
    once they have)."""
    context = multiprocessing.get_context("fork")
    pipes, processes = [], []
    for share in range(clients):
        ours, theirs = context.Pipe()
        n = count // clients + (share < count % clients)
        process = context.Process(target=client, args=(host, port, n, request, marker, theirs))
        process.start()
        pipes.append(ours)
        processes.append(process)
    return pipes, processes


def arrivals(pipes: list[Connection], processes: list[multiprocessing.Process],
             count: int) -> list[float]:
    """When each connection's answer arrived, from every client process."""
    arrived = [t for pipe in pipes for t in pipe.recv()]
    for process in processes:
        process.join()
    if len(arrived) < count or math.inf in arrived:
        raise SystemExit(f"only {len(arrived)} of {count} connections were woken")
    return arrived


def settle(count: int) -> None:
    """Give the last requests time to reach their wait."""
    time.sleep(0.5 + count / 5000)


def floor_round(count: int, clients: int, size: int) -> list[float]:
    """The floor (module docstring): each connection's latency from the first `send`."""
    with socket.create_server(("127.0.0.1", 0), backlog=4096) as listener:
        host, port = listener.getsockname()[:2]
        request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        pipes, processes = clients_parked(host, port, count, request, None, clients)
        accepted = [listener.accept()[0] for _ in range(count)]
        for pipe in pipes:
            pipe.recv()
        settle(count)
        head = f"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: {size}\r\n\r\n"
        answer = head.encode() + b"x" * max(0, size - len(head))
        sent = time.monotonic()
        for connection in accepted:
            connection.send(answer)
        arrived = arrivals(pipes, processes, count)
        for connection in accepted:
            connection.close()
    return [t - sent for t in arrived]


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


def round_of(sidecar: str, count: int, sse: bool,
             clients: int) -> tuple[list[float], Span | None]:
    """Park `count` connections across `clients` processes, stop the queue; each
    connection's latency, and the sidecar's own span from the change to its last write
    (None when it does not report one)."""
    released(sidecar)
    url = urlsplit(sidecar)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    if sse:
        path, marker = f"/events?queue={QUEUE}", b"event: flow"
    else:
        version = requests.get(f"{sidecar}/flow/{QUEUE}", timeout=10).json()["version"]
        path, marker = f"/flow/{QUEUE}?since={version}&wait=60", None
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
               .encode())
    pipes, processes = clients_parked(host, port, count, request, marker, clients)
    for pipe in pipes:
        pipe.recv()
    settle(count)
    sent = time.monotonic()
    set_stop(sidecar, 1)
    arrived = arrivals(pipes, processes, count)
    wakeups = requests.get(f"{sidecar}/healthz", timeout=10).json().get("wakeups") or {}
    last = wakeups.get("streams" if sse else "longPolls")
    span = (last["seconds"], last["cpuSeconds"]) if last and last["connections"] == count \
        else None
    return [t - sent for t in arrived], span


def answer_bytes(sidecar: str) -> bytes:
    """A whole long-poll answer as the sidecar writes it (status line, headers, body):
    the floor writes as many bytes."""
    url = urlsplit(sidecar)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    with socket.create_connection((host, port)) as sock:
        sock.sendall(f"GET /flow/{QUEUE} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


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
    parser.add_argument("--clients", type=int, default=2,
                        help="client processes the connections are shared between")
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
            size = len(answer_bytes(running.url))
            single, many, spans, floor = [], [], [], []
            for _ in range(args.rounds):
                single += round_of(running.url, 1, args.sse, 1)[0]
                latencies, span = round_of(running.url, args.waiters, args.sse, args.clients)
                many += latencies
                spans += [span] if span is not None else []
                floor += floor_round(args.waiters, args.clients, size)
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
    floor_p99 = statistics.quantiles(floor, n=100)[98]
    print(f"floor, {args.waiters} bare sends of {size} bytes: median "
          f"{statistics.median(floor) * ms:.1f} ms, p99 {floor_p99 * ms:.1f} ms; "
          f"ratio p99 sidecar / floor: {p99 / floor_p99:.2f}")
    print("sidecar, change to last write: " + (", ".join(
        f"{wall * ms:.1f} ms ({cpu * ms:.1f} ms CPU over the writes)" for wall, cpu in spans)
        if spans else "not reported"))


if __name__ == "__main__":
    main()
