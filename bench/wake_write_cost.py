"""CPU a wake-up spends per long poll beside the kernel's write: the sidecar's attempt
(`api/edge/parked_polls.py`: `begin_whole`, `write_around`) against a bare `os.write` of the
same bytes to the same loopback connections, in one process, alternated.

    .venv/bin/python bench/wake_write_cost.py [--connections 4000] [--repeat 7] [--size 1029]

Each connection is a real TCP loopback pair; the bench writes one answer to each, reads
them all back (untimed), and does it again. The cycle and transport each attempt reads
are stand-ins with uvicorn's attribute names (their `is_closing` and
`get_write_buffer_size` are Python methods, dearer than uvloop's, so the sidecar's part is
an upper bound). CPU time of this thread (user and kernel), so another process's load moves
it little: the figure to set beside a wake-up's wall time on two threads
(docs/benchmarks.md#direct-writes-against-send).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import api.edge.paired_writes as paired
from api.edge.parked_polls import Parked, attempt_of
from tests.utils.bench_targets import raise_fd_limit

KEY = ("/", "bench")


class Transport:
    """What `begin_whole` and `write_around` ask of a transport with nothing queued."""

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class Flow:
    write_paused = False


class Cycle:
    """A parked request's uvicorn cycle, as far as a wake-up reads and marks it."""

    def __init__(self) -> None:
        self.disconnected = False
        self.transport = Transport()
        self.response_started = False
        self.flow = Flow()
        self.waiting_for_100_continue = False
        self.keep_alive = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--size", type=int, default=1029, help="bytes of an answer")
    args = parser.parse_args()
    raise_fd_limit(2 * args.connections)
    answer = b"x" * args.size
    with socket.create_server(("127.0.0.1", 0), backlog=args.connections) as listener:
        pairs = []
        for _ in range(args.connections):
            client = socket.create_connection(listener.getsockname()[:2])
            pairs.append((listener.accept()[0], client))
    for _, client in pairs:
        client.setblocking(False)
    fds = [server.fileno() for server, _ in pairs]
    attempt = attempt_of({}, {KEY: (answer, answer)})  # the sidecar's own, no paced queue

    def bare() -> float:
        started = time.thread_time()
        for fd in fds:
            os.write(fd, answer)
        return time.thread_time() - started

    def sidecar() -> float:
        parked = [Parked(KEY, Cycle(), fd, (None, 0, None), 0.0, None)  # type: ignore[arg-type]
                  for fd in fds]
        started = time.thread_time()
        for one in parked:
            attempt(one)
        return time.thread_time() - started

    def python_only() -> float:
        paired.write_fd = lambda fd, data: memoryview(data).nbytes
        try:
            return sidecar()
        finally:
            paired.write_fd = os.write

    runs: dict[str, list[float]] = {"bare os.write (baseline)": [], "the sidecar's attempt": [],
                                    "its Python alone (no write)": []}
    for _ in range(args.repeat):
        for label, run in zip(runs, (bare, sidecar, python_only), strict=True):
            drain(pairs)
            runs[label].append(run())
    drain(pairs)
    base = statistics.median(runs["bare os.write (baseline)"])
    print(f"{args.connections} TCP loopback connections, {args.size}-byte answers, CPU of "
          f"this thread, median of {args.repeat}:")
    for label, values in runs.items():
        each = statistics.median(values) / args.connections
        print(f"  {label}: {each * 1e6:.2f} us a connection ({each * args.connections / base:.2f}x)")


def drain(pairs: list[tuple[socket.socket, Any]]) -> None:
    """Read back every answer written, so that the next round writes to empty sockets."""
    for _, client in pairs:
        try:
            while client.recv(65536):
                pass
        except BlockingIOError:
            pass


if __name__ == "__main__":
    main()
