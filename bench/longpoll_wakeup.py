"""Wake-up latency of N long-poll waiters, or N SSE streams, on one queue, against one in
the same run.

    .venv/bin/python bench/longpoll_wakeup.py [--waiters 1000] [--rounds 3] [--sse] [--clients 2]
        [--read-after] [--modes off,on] [--management-url URL --amqp-url URL --user U --password P]
        [--sidecar-url URL]

N raw HTTP/1.1 connections park `GET /flow/{queue}?since=V&wait=60` (or, with `--sse`,
stream `GET /events?queue={queue}`) in a real flow-sidecar process; a `PUT` of new
thresholds then stops the queue (it holds two messages; the stop moves from 1000 to 1, and
back between measurements). Latency is the time from sending the PUT to each connection's
first byte of the answer (or of the `flow` event). The baseline is the same measurement
with one connection. The connections are shared between `--clients` processes (2) that
read them with a bare epoll loop, on the same machine: their reading is part of what is
measured, so the bench also prints the sidecar's own span from the change to its last
write (`/healthz` `wakeups`, where the sidecar reports it), and each answer's arrival: the
kernel's receive timestamp of its bytes (`SO_TIMESTAMPNS`; on loopback it is taken in the
sender's `send`), which a slow reader does not delay. With `--read-after` the clients do not
read until the answers are all written (the sidecar says so in `/healthz`, the floor when
its loop ends): 10,000 producers are not one process on the sidecar's machine, and that
mode gives the sidecar the machine the way they would. Only arrivals are timed then, and
the connections are kept alive: an unread answer and the close written after it merge in
the reader's socket, and the merged bytes carry the close's timestamp (the kernel keeps
the later one), up to 340 ms later in a trial.

The floor, in the same run: the same number of connections, read by the same client
processes, but accepted by the bench itself, which writes each an answer of the same size
in bare loops of `send` on `--floor-threads` threads (2, as the sidecar's wake-up: no HTTP
server, no event loop): the least any server on this machine can do for N connections,
each needing its own write.
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
import struct
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.utils.bench_targets import Target, add_target_options, raise_fd_limit

QUEUE = "bench-longpoll"
Span = tuple[float, float]  # the sidecar's wall and CPU seconds from the change to its last write
Latency = tuple[float, float]  # an answer's read and arrival, seconds after the change
Arrival = tuple[float, float]  # when an answer was read (time.monotonic) and arrived (time.time)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python names it from 3.14 on
STAMP = struct.Struct("qq")  # struct timespec
MS = 1000.0


def park(host: str, port: int, count: int, request: bytes,
         marker: bytes | None) -> list[socket.socket]:
    """`count` connections, each with its request parked in the sidecar (an SSE stream
    once it has sent `: ready`), non-blocking."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
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


def receive(socks: list[socket.socket], marker: bytes | None, timeout: float) -> list[Arrival]:
    """When each connection read its answer (any byte) or `marker`, by a bare epoll loop
    (the cheapest reader, so that what is timed is the sidecar), and when those bytes
    arrived (the kernel's timestamp)."""
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
            seen = key.data[0] + data
            if marker is None or marker in seen or not data:
                arrived.append((now, stamped(ancillary)) if data else (math.inf, math.inf))
                selector.unregister(key.fileobj)
            else:
                key.data[0] = seen[-4096:]
    return arrived


def stamped(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive timestamp (time.time()'s clock) of the bytes just read."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = STAMP.unpack(data[:STAMP.size])
            return float(seconds + nanoseconds / 1e9)
    raise SystemExit("no receive timestamp: SO_TIMESTAMPNS is not supported here")


def client(host: str, port: int, count: int, request: bytes, marker: bytes | None,
           pipe: Connection) -> None:
    """One client process: park `count` connections, say so, send back when each answer
    was read and arrived (after the bench says "read" when it asked for `--read-after`)."""
    socks = park(host, port, count, request, marker)
    pipe.send("parked")
    if pipe.recv() == "read after":
        pipe.recv()
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


def parked(pipes: list[Connection], read_after: bool) -> None:
    """Wait until every client has parked its connections, and tell them when to read."""
    for pipe in pipes:
        pipe.recv()
    for pipe in pipes:
        pipe.send("read after" if read_after else "read now")


def arrivals(pipes: list[Connection], processes: list[multiprocessing.Process], count: int,
             changed: Arrival, read_after: bool) -> list[Latency]:
    """Each connection's answer: read and arrived, seconds after `changed` (read and
    arrived are in the clocks of `Arrival`); with `read_after`, the clients read now."""
    if read_after:
        for pipe in pipes:
            pipe.send("read")
    arrived = [t for pipe in pipes for t in pipe.recv()]
    for process in processes:
        process.join()
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
        pipes, processes = clients_parked(host, port, count, request, None, clients)
        accepted = [listener.accept()[0] for _ in range(count)]
        parked(pipes, read_after)
        settle(count)
        head = f"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: {size}\r\n\r\n"
        answer = head.encode() + b"x" * max(0, size - len(head))
        sent = now()
        send_all(accepted, answer, threads)
        arrived = arrivals(pipes, processes, count, sent, read_after)
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
    close = "" if read_after else "Connection: close\r\n"  # see the module docstring
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{close}\r\n".encode()
    pipes, processes = clients_parked(host, port, count, request, marker, clients)
    parked(pipes, read_after)
    settle(count)
    kind = "streams" if sse else "longPolls"
    before = last_wakeup(sidecar, kind)
    sent = now()
    set_stop(sidecar, 1)
    if read_after:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)  # not during the writes: the sidecar would answer between them
            if last_wakeup(sidecar, kind) != before:
                break
    arrived = arrivals(pipes, processes, count, sent, read_after)
    last = last_wakeup(sidecar, kind)
    span = (last["seconds"], last["cpuSeconds"]) if last and last["connections"] == count \
        else None
    return arrived, span


def last_wakeup(sidecar: str, kind: str) -> dict[str, float] | None:
    """The sidecar's figures of its last wake-up of `kind` (`/healthz` `wakeups`)."""
    return (requests.get(f"{sidecar}/healthz", timeout=10).json().get("wakeups") or {}).get(kind)


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
    parser.add_argument("--floor-threads", type=int, default=2, help=(
        "threads the floor's sends are dealt to (the sidecar writes a wake-up on 2; 1: "
        "the bare loop of the figures before 2026-11-28)"))
    parser.add_argument("--sse", action="store_true", help="SSE streams instead of long polls")
    parser.add_argument("--clients", type=int, default=2,
                        help="client processes the connections are shared between")
    parser.add_argument("--read-after", action="store_true", help=(
        "the clients read only once the answers are written; only arrivals are timed"))
    parser.add_argument("--modes", default="on", help=(
        "--direct-writes modes to measure in turn, e.g. off,on: the first is the baseline "
        "the others' p99 is divided by"))
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
    kind = "SSE streams" if args.sse else "long-poll waiters"
    p99s: dict[str, float] = {}
    try:
        for mode in args.modes.split(","):
            print(f"--direct-writes {mode}")
            p99s[mode] = measure(target, args, kind, limit, mode)
    finally:
        cleanup = target.channel()
        cleanup.queue_delete(QUEUE)
        cleanup.connection.close()
    base, *others = p99s
    for mode in others:
        print(f"p99 arrived, --direct-writes {mode} / {base}: "
              f"{p99s[mode] / p99s[base]:.2f}")


def measure(target: Target, args: argparse.Namespace, kind: str, limit: int,
            mode: str) -> float:
    """One sidecar with `--direct-writes mode`, measured and reported; its p99 of
    arrivals."""
    with target.sidecar("--direct-writes", mode, prefix="bench-lp-") as running:
        files = running.open_files()
        wait_for_depth(running.url, 2)
        size = len(answer_bytes(running.url))
        single: list[Latency] = []
        many: list[Latency] = []
        floor: list[Latency] = []
        spans: list[Span] = []
        for _ in range(args.rounds):
            single += round_of(running.url, 1, args.sse, 1, args.read_after)[0]
            latencies, span = round_of(running.url, args.waiters, args.sse, args.clients,
                                       args.read_after)
            many += latencies
            spans += [span] if span is not None else []
            floor += floor_round(args.waiters, args.clients, size, args.read_after,
                                 args.floor_threads)
        set_stop(running.url, 1000)
    print(f"open files: bench {limit}, sidecar {files}")
    print("clients read " + ("once the answers were written: only arrivals are timed"
                             if args.read_after else "as the answers came"))
    timings = [(1, "arrived")] if args.read_after else [(0, "read"), (1, "arrived")]
    for column, what in timings:
        report(what, [t[column] for t in single], [t[column] for t in many],
               [t[column] for t in floor], args.waiters, kind, size, args.floor_threads)
    print("sidecar, change to last write: " + (", ".join(
        f"{wall * MS:.1f} ms ({cpu * MS:.1f} ms CPU over the writes)" for wall, cpu in spans)
        if spans else "not reported"))
    return statistics.quantiles([t[1] for t in many], n=100)[98]


def report(what: str, single: list[float], many: list[float], floor: list[float],
           waiters: int, kind: str, size: int, threads: int) -> None:
    """One timing (answers read, or arrived) of the one, the many and the floor."""
    p50, p99 = statistics.median(many), statistics.quantiles(many, n=100)[98]
    floor_p99 = statistics.quantiles(floor, n=100)[98]
    print(f"{what}: one of the {kind}: median {statistics.median(single) * MS:.1f} ms")
    print(f"{what}: {waiters} {kind}: median {p50 * MS:.1f} ms, p99 {p99 * MS:.1f} ms, "
          f"max {max(many) * MS:.1f} ms (all woken: {len(many)})")
    print(f"{what}: ratio median {waiters} / one: {p50 / statistics.median(single):.1f}")
    print(f"{what}: floor, {waiters} bare sends of {size} bytes on {threads} thread(s): "
          f"median {statistics.median(floor) * MS:.1f} ms, p99 {floor_p99 * MS:.1f} ms; "
          f"ratio p99 sidecar / floor: {p99 / floor_p99:.2f}")


if __name__ == "__main__":
    main()
