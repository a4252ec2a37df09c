"""Wake-up latency of N long polls and N SSE streams on one queue, each `--direct-writes`
mode in a sidecar of its own, against the first mode (`off`: every answer through ASGI
`send`) and against the floor, in the same run.

    .venv/bin/python bench/longpoll_wakeup.py [--waiters 10000] [--rounds 1]
        [--kinds polls,sse] [--modes off,on] [--clients 2] [--read-now] [--floor-threads 2]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

N raw keep-alive HTTP/1.1 connections park `GET /flow/{queue}?since=V&wait=60` (or stream
`GET /events?queue={queue}`) in a real flow-sidecar process; a `PUT` of new thresholds
then stops the queue (it holds two messages; the stop moves from 1000 to 1, and back
between measurements). A connection's latency is the time from sending the PUT (the
change and its HTTP request: "one alone" shows what that costs) to the last bytes of its
whole answer (the long poll's body, or the stream's `flow` event to its blank line), as
a producer sees it: the kernel's receive timestamp of those bytes (`SO_TIMESTAMPNS`; on
loopback it is taken in the sender's `send`), their arrival. The connections are shared
between `--clients` processes (2) on the same machine. By default they read nothing until
every connection has something to read (a one-shot epoll looked at every 10 ms, which
costs the writer nothing), then read it all: 10,000 producers are not one process on the
sidecar's cores, and their reading would be part of what is timed. With `--read-now` they
read as the answers come (a bare epoll loop), and each answer's read is printed beside its
arrival: the difference is the clients' own cost. Nothing waits for the sidecar's own
report of a wake-up (`/healthz` `wakeups`, printed where given: only the direct path
gives it), so both modes are timed alike. Reading must not wait long: uvicorn closes a
kept-alive connection 5 s after its answer, and an unread answer read with that close
carries the close's timestamp (checked: 5.0 s after the change), so a wake-up of over 5 s
would be timed late.

The floor, in the same sidecar's turn: the same number of connections, read by the same
client processes, but accepted by the bench itself, which writes each an answer of the
same size in bare loops of `send` on `--floor-threads` threads (2, as the sidecar's
wake-up: no HTTP server, no event loop): the least any server on this machine can do for
N connections, each needing its own write.
Both processes need N open files: the bench lifts its soft limit (the sidecar it starts
inherits it; flow-sidecar lifts its own to the hard limit) and prints both.
Figures: docs/benchmarks.md, "Direct writes against send".
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import re
import select
import selectors
import socket
import statistics
import struct
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options, raise_fd_limit

QUEUE = "bench-longpoll"
Span = tuple[int, float, float]  # the sidecar's last wake-up: connections, wall and CPU seconds
Latency = tuple[float, float]  # an answer's read and arrival, seconds after the change
Arrival = tuple[float, float]  # when an answer was read (time.monotonic) and arrived (time.time)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python names it from 3.14 on
STAMP = struct.Struct("qq")  # struct timespec
MS = 1000.0
WAIT = 60.0  # the longest a client waits for its answers
LOOK_SECONDS = 0.01  # how often a client looks whether its answers are in (read after)
KINDS = {"polls": "long polls", "sse": "SSE streams"}


def park(host: str, port: int, count: int, request: bytes,
         sse: bool) -> list[socket.socket]:
    """`count` connections, each with its request parked in the sidecar (an SSE stream
    once it has sent `: ready`), non-blocking."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.sendall(request)
        socks.append(sock)
    if sse:
        for sock in socks:
            seen = b""
            while b": ready" not in seen:
                seen = (seen + sock.recv(65536))[-4096:]
    for sock in socks:
        sock.setblocking(False)
    return socks


def whole(seen: bytes, sse: bool) -> bool:
    """`seen` holds a whole answer: a long poll's headers and `content-length` bytes of
    body, or a stream's `flow` event to its blank line."""
    if sse:
        return b"\n\n" in seen.partition(b"event: flow")[2]
    head, blank, body = seen.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    return bool(blank) and length is not None and len(body) >= int(length[1])


def all_readable(socks: list[socket.socket], timeout: float) -> None:
    """Wait, without reading a byte, until every connection has something to read (a
    one-shot epoll, looked at every `LOOK_SECONDS`: the client leaves the cores to the
    writer)."""
    poller = select.epoll()
    for sock in socks:
        poller.register(sock, select.EPOLLIN | select.EPOLLONESHOT)
    ready = 0
    deadline = time.monotonic() + timeout
    while ready < len(socks) and time.monotonic() < deadline:
        time.sleep(LOOK_SECONDS)
        ready += len(poller.poll(0, len(socks)))
    poller.close()


def receive(socks: list[socket.socket], sse: bool, timeout: float) -> list[Arrival]:
    """When each connection had read its whole answer, by a bare epoll loop (the cheapest
    reader, so that what is timed is the sidecar), and when its last bytes arrived (the
    kernel's timestamp)."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_READ, [b""])
    arrived: list[Arrival] = []
    deadline = time.monotonic() + timeout
    space = socket.CMSG_SPACE(STAMP.size)
    while len(arrived) < len(socks) and time.monotonic() < deadline:
        for key, _ in selector.select(1.0):
            data, ancillary, _, _ = key.fileobj.recvmsg(65536, space)  # type: ignore[union-attr]
            now = time.monotonic()
            seen = key.data[0] = key.data[0] + data
            if not data or whole(seen, sse):
                arrived.append((now, stamped(ancillary)) if data else (math.inf, math.inf))
                selector.unregister(key.fileobj)
    return arrived


def stamped(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive timestamp (time.time()'s clock) of the bytes just read."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = STAMP.unpack(data[:STAMP.size])
            return float(seconds + nanoseconds / 1e9)
    raise SystemExit("no receive timestamp: SO_TIMESTAMPNS is not supported here")


def client(host: str, port: int, count: int, request: bytes, sse: bool, read_after: bool,
           pipe: Connection) -> None:
    """One client process: park `count` connections, say so, and once told to go, send
    back when each answer was read and arrived (with `read_after`, reading only once
    every connection has something to read)."""
    socks = park(host, port, count, request, sse)
    pipe.send("parked")
    pipe.recv()
    if read_after:
        all_readable(socks, WAIT)
    pipe.send(receive(socks, sse, WAIT))
    for sock in socks:
        sock.close()


def clients_parked(host: str, port: int, count: int, request: bytes, sse: bool,
                   clients: int, read_after: bool
                   ) -> tuple[list[Connection], list[BaseProcess]]:
    """`clients` processes that park `count` connections between them (they say "parked"
    once they have)."""
    context = multiprocessing.get_context("fork")
    pipes: list[Connection] = []
    processes: list[BaseProcess] = []
    for share in range(clients):
        ours, theirs = context.Pipe()
        n = count // clients + (share < count % clients)
        process = context.Process(target=client,
                                  args=(host, port, n, request, sse, read_after, theirs))
        process.start()
        pipes.append(ours)
        processes.append(process)
    for pipe in pipes:
        pipe.recv()
    for pipe in pipes:
        pipe.send("go")
    return pipes, processes


def arrivals(pipes: list[Connection], processes: list[BaseProcess], count: int,
             changed: Arrival) -> list[Latency]:
    """Each connection's answer: read and arrived, seconds after `changed` (read and
    arrived are in the clocks of `Arrival`)."""
    answers = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join()
    arrived = [t for got in answers for t in got]
    woken = sum(read != math.inf for read, _ in arrived)
    if woken < count:
        raise SystemExit(f"only {woken} of {count} connections were woken")
    return [(read - changed[0], at - changed[1]) for read, at in arrived]


def settle(count: int) -> None:
    """Give the last requests time to reach their wait."""
    time.sleep(0.5 + count / 5000)


def now() -> Arrival:
    """Now, in both clocks of `Arrival`: a change is compared with reads and arrivals."""
    return time.monotonic(), time.time()


def floor_round(count: int, clients: int, size: int, read_after: bool,
                threads: int) -> list[Latency]:
    """The floor (module docstring): each connection's latency from the first `send`."""
    with socket.create_server(("127.0.0.1", 0), backlog=4096) as listener:
        host, port = listener.getsockname()[:2]
        request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        accepting = threading.Thread(target=lambda: accepted.extend(
            listener.accept()[0] for _ in range(count)))
        accepted: list[socket.socket] = []
        accepting.start()
        pipes, processes = clients_parked(host, port, count, request, False, clients,
                                          read_after)
        accepting.join()
        settle(count)
        body = b"x" * max(0, size - 40)  # 40: the status line and header below
        answer = f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body
        sent = now()
        send_all(accepted, answer, threads)
        arrived = arrivals(pipes, processes, count, sent)
        for connection in accepted:
            connection.close()
    return arrived


def send_all(connections: list[socket.socket], answer: bytes, threads: int) -> None:
    """`send` the answer on every connection, the connections dealt in turn to `threads`
    threads (this one among them), as the sidecar deals a wake-up's writes to two."""

    def part(share: list[socket.socket]) -> None:
        for connection in share:
            connection.send(answer)

    helpers = [threading.Thread(target=part, args=(connections[i::threads],))
               for i in range(1, threads)]
    for helper in helpers:
        helper.start()
    part(connections[::threads])
    for helper in helpers:
        helper.join()


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


def round_of(sidecar: str, count: int, sse: bool, clients: int,
             read_after: bool) -> tuple[list[Latency], Span | None]:
    """Park `count` keep-alive connections across `clients` processes, stop the queue;
    each connection's latency, and the sidecar's own span from the change to its last
    write (None when it does not report one: `--direct-writes off`)."""
    released(sidecar)
    url = urlsplit(sidecar)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    if sse:
        path = f"/events?queue={QUEUE}"
    else:
        version = requests.get(f"{sidecar}/flow/{QUEUE}", timeout=10).json()["version"]
        path = f"/flow/{QUEUE}?since={version}&wait=60"
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    pipes, processes = clients_parked(host, port, count, request, sse, clients, read_after)
    settle(count)
    kind = "streams" if sse else "longPolls"
    before = last_wakeup(sidecar, kind)
    sent = now()
    set_stop(sidecar, 1)
    arrived = arrivals(pipes, processes, count, sent)
    deadline = time.monotonic() + 10  # it reports once every woken request has ended
    while (last := last_wakeup(sidecar, kind)) == before and time.monotonic() < deadline \
            and sidecar_writes(sidecar) == "direct":
        time.sleep(0.2)
    span = (int(last["connections"]), last["seconds"], last["cpuSeconds"]) \
        if last and last != before else None
    return arrived, span


def last_wakeup(sidecar: str, kind: str) -> dict[str, float] | None:
    """The sidecar's figures of its last wake-up of `kind` (`/healthz` `wakeups`)."""
    return wakeups(sidecar).get(kind)


def sidecar_writes(sidecar: str) -> str | None:
    """How the sidecar writes wake-ups: "direct" or "send" (`/healthz` `wakeups`)."""
    return wakeups(sidecar).get("writes")


def wakeups(sidecar: str) -> dict[str, Any]:
    return requests.get(f"{sidecar}/healthz", timeout=10).json().get("wakeups") or {}


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


@dataclass(frozen=True)
class Figures:
    """One kind of connection in one mode: p99 of arrivals, the sidecar's and the
    floor's, in seconds."""

    p99: float
    floor_p99: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kinds", default="polls,sse", help=(
        "what to park, measured in turn in each mode: polls (long polls), sse (streams)"))
    parser.add_argument("--modes", default="off,on", help=(
        "--direct-writes modes, each in a sidecar of its own: the first is the baseline "
        "the others' p99 is divided by"))
    parser.add_argument("--floor-threads", type=int, default=2, help=(
        "threads the floor's sends are dealt to (the sidecar writes a wake-up on 2)"))
    parser.add_argument("--clients", type=int, default=2,
                        help="client processes the connections are shared between")
    parser.add_argument("--read-now", action="store_true", help=(
        "the clients read as the answers come, on the sidecar's cores (default: they read "
        "once every connection has its answer, as producers on other machines would)"))
    add_target_options(parser)
    args = parser.parse_args()
    target = Target.from_args(args)
    limit = raise_fd_limit(args.waiters)
    channel = target.channel()
    channel.queue_declare(QUEUE, arguments={"qpid.flow_stop_count": 1000})
    channel.queue_purge(QUEUE)
    for _ in range(2):
        channel.basic_publish("", QUEUE, b"m")
    channel.connection.close()  # idle for minutes meanwhile: its heartbeats would lapse
    print(f"open files: bench {limit}; clients read "
          + ("as the answers came" if args.read_now else "once every answer had arrived"))
    figures: dict[str, dict[str, Figures]] = {}
    try:
        for mode in args.modes.split(","):
            figures[mode] = measure(target, args, mode)
    finally:
        cleanup = target.channel()
        cleanup.queue_delete(QUEUE)
        cleanup.connection.close()
    summary(figures, args.waiters)


def measure(target: Target, args: argparse.Namespace, mode: str) -> dict[str, Figures]:
    """One sidecar with `--direct-writes mode`, each kind measured and reported."""
    got = {}
    with target.sidecar("--direct-writes", mode, prefix="bench-lp-") as running:
        print(f"--direct-writes {mode}: sidecar's open files {running.open_files()}")
        wait_for_depth(running.url, 2)
        size = len(answer_bytes(running.url))
        for kind in args.kinds.split(","):
            sse = kind == "sse"
            single: list[Latency] = []
            many: list[Latency] = []
            floor: list[Latency] = []
            spans: list[Span] = []
            for _ in range(args.rounds):
                single += round_of(running.url, 1, sse, 1, not args.read_now)[0]
                latencies, span = round_of(running.url, args.waiters, sse, args.clients,
                                           not args.read_now)
                many += latencies
                spans += [span] if span is not None else []
                floor += floor_round(args.waiters, args.clients, size, not args.read_now,
                                     args.floor_threads)
            label = f"--direct-writes {mode}, {args.waiters} {KINDS[kind]}"
            for column, what in [(0, "read"), (1, "arrived")][not args.read_now:]:
                report(f"{label}, {what}", [t[column] for t in single],
                       [t[column] for t in many], [t[column] for t in floor], size,
                       args.floor_threads)
            print(f"{label}, the sidecar's span, change to last write: " + (", ".join(
                f"{wall * MS:.1f} ms ({cpu * MS:.1f} ms CPU) for {connections}"
                for connections, wall, cpu in spans)
                if spans else "not reported"), flush=True)
            got[kind] = Figures(p99([t[1] for t in many]), p99([t[1] for t in floor]))
        set_stop(running.url, 1000)
    return got


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def report(label: str, single: list[float], many: list[float], floor: list[float],
           size: int, threads: int) -> None:
    """One timing (answers read, or arrived) of the one, the many and the floor."""
    print(f"{label}: median {statistics.median(many) * MS:.1f} ms, p99 {p99(many) * MS:.1f} "
          f"ms, max {max(many) * MS:.1f} ms; one alone: {statistics.median(single) * MS:.1f}"
          f" ms; the floor ({size}-byte answers, {threads} thread(s)): median "
          f"{statistics.median(floor) * MS:.1f} ms, p99 {p99(floor) * MS:.1f} ms; p99 "
          f"against the floor {p99(many) / p99(floor):.2f}x")


def summary(figures: dict[str, dict[str, Figures]], waiters: int) -> None:
    """p99 of arrivals per kind and mode, against the first mode and the floor."""
    base, *others = figures
    print(f"\nsummary, {waiters} on one queue, p99 of arrivals after the change "
          f"(the floor's p99 in the same sidecar's turn), against --direct-writes {base}:")
    for kind in figures[base]:
        cells = [f"{mode} {got[kind].p99 * MS:.1f} ms (floor {got[kind].floor_p99 * MS:.1f}"
                 f" ms, {got[kind].p99 / got[kind].floor_p99:.2f}x)"
                 for mode, got in figures.items()]
        ratios = [f"{mode}/{base} {figures[mode][kind].p99 / figures[base][kind].p99:.2f}"
                  for mode in others]
        print(f"  {KINDS[kind]}: " + "; ".join(cells + ratios))


if __name__ == "__main__":
    main()
