"""What every bench (bench/) needs to aim at a broker and a sidecar, and to measure processes.

`add_target_options` gives a bench `--management-url`, `--amqp-url`, `--user`,
`--password` (defaults: the main node of deploy/ensure-rabbitmq.sh, unchanged) and
`--sidecar-url` (an existing sidecar; default: the bench starts its own). `ProcessCpu`
reads a process's CPU time and RSS from /proc, and `broker_pid` finds the RabbitMQ node
(beam.smp) that listens on a port, so a bench can say what the broker spent. `Target`
holds the same options for the HTTP benches: an AMQP channel, and a sidecar (`--sidecar-url`'s
or one of its own) with its process status; `raise_fd_limit` makes room for many sockets.
Every address a bench uses is on loopback (the options' defaults are).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import multiprocessing
import os
import resource
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from urllib.parse import quote, urlsplit

import pika
import requests

from tests.utils.sidecar_process import SidecarProcess, eventually

ROOT = Path(__file__).resolve().parents[2]

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def add_target_options(parser: argparse.ArgumentParser, *, management: str =
                       "http://127.0.0.1:15672", amqp: str = "amqp://127.0.0.1:5672/%2F"
                       ) -> None:
    """The broker and sidecar options every bench takes."""
    parser.add_argument("--management-url", default=management)
    parser.add_argument("--amqp-url", default=amqp, help="without credentials: see --user")
    parser.add_argument("--user", default="guest")
    parser.add_argument("--password", default="guest")
    parser.add_argument("--sidecar-url", default=None, help=(
        "an existing flow-sidecar watching that broker (default: start one)"))


def amqp_url(args: argparse.Namespace) -> str:
    """--amqp-url with --user and --password in it, unless it names a user itself."""
    return login_url(args.amqp_url, args.user, args.password)


def login_url(url: str, user: str, password: str) -> str:
    """An AMQP URL with this login, unless it names a user itself; vhost "/" by default."""
    parts = urlsplit(url)
    if parts.username is not None:
        return url
    return (f"{parts.scheme}://{quote(user, safe='')}:{quote(password, safe='')}"
            f"@{parts.netloc}{parts.path or '/%2F'}")


class ExistingSidecar(SidecarProcess):
    """A sidecar the bench did not start: the same calls, no process to stop."""

    def __init__(self, url: str) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="bench-existing-")))
        self.url = url.rstrip("/")

    def start(self, wait_ready: bool = True) -> SidecarProcess:
        return self

    def stop(self) -> None:
        pass


def sidecar_for(args: argparse.Namespace, prefix: str, *options: str,
                ready_within: float = 20.0) -> SidecarProcess:
    """--sidecar-url's sidecar, or a new one on the bench's broker with these options,
    once it answers /readyz (its first poll: at 10,000 queues that takes a while)."""
    if args.sidecar_url:
        return ExistingSidecar(args.sidecar_url)
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix=prefix)), "--management-url",
                             args.management_url, "--management-user", args.user, *options,
                             env={"FLOW_MANAGEMENT_PASSWORD": args.password,  # not in argv
                                  "FLOW_AMQP_URL": amqp_url(args)}).start(wait_ready=False)
    try:
        eventually(lambda: sidecar.get("/readyz").ok, timeout=ready_within)
    except BaseException:
        sidecar.stop()
        raise
    return sidecar


class ProcessCpu:
    """A process's CPU seconds (user + system) and resident memory, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss_bytes(self) -> int:
        return int(Path(f"/proc/{self.pid}/statm").read_text().split()[1]) * PAGE


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def broker_pid(port: int) -> int | None:
    """The process listening on `port` (the broker's AMQP port), or None when this user
    cannot see it."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def _probe(host: str, port: int, path: str, step: float, done: Event,
           results: Connection) -> None:
    """FlowProbe's process: time a GET every `step` s until `done`; send (latencies, when
    each began by the monotonic clock, errors)."""
    latencies: list[float] = []
    began: list[float] = []
    errors = 0
    connection = http.client.HTTPConnection(host, port, timeout=10)
    while not done.is_set():
        started = time.perf_counter()
        began.append(time.monotonic())
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            connection = http.client.HTTPConnection(host, port, timeout=10)
        latencies.append(time.perf_counter() - started)
        time.sleep(max(0.0, step - (time.perf_counter() - started)))
    results.send((latencies, began, errors))


class FlowProbe:
    """GET /flow/{queue} every `step` seconds on one keep-alive connection; latencies.

    From a process of its own: a thread of the bench would share the GIL with the bench's
    load (1,000 waiters and a dashboard in asyncio), and a 2026-11-26 soak timed that too
    (25 answers over 50 ms, while a watchdog in the sidecar saw its loop held that long
    once). `start`, then `done.set()` and `join`, then read `latencies` (and when each
    request began, `began`) and `errors`. `path` asks for another path than /flow's."""

    def __init__(self, base: str, queue: str, step: float = 0.01,
                 path: str | None = None) -> None:
        parts = urlsplit(base)
        context = multiprocessing.get_context("fork")
        self.done = context.Event()
        self._results, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=_probe, daemon=True, args=(
            parts.hostname or "127.0.0.1", parts.port or 80, path or f"/flow/%2F/{queue}",
            step, self.done, sending))
        self.latencies: list[float] = []
        self.began: list[float] = []
        self.errors = 0

    def start(self) -> None:
        self._process.start()

    @property
    def pid(self) -> int:
        """The probe's process, once started (to see whether the client waited for a CPU)."""
        return self._process.pid or 0

    def join(self) -> None:
        """Wait for the process (after `done.set()`) and take its figures."""
        self.latencies, self.began, self.errors = self._results.recv()
        self._process.join()

    def over(self, seconds: float) -> list[tuple[float, float]]:
        """(began, ended) of the answers that took longer than `seconds`."""
        return [(b, b + t) for b, t in zip(self.began, self.latencies, strict=True)
                if t > seconds]


def _floor_server(ready: Connection, body: bytes) -> None:
    """FloorServer's process: answer every request on every connection with `body`."""
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d"
              b"\r\n\r\n%b" % (len(body), body))

    class Answering(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.seen = b""

        def data_received(self, data: bytes) -> None:
            self.seen += data
            while b"\r\n\r\n" in self.seen:
                _, self.seen = self.seen.split(b"\r\n\r\n", 1)
                self.transport.write(answer)  # type: ignore[attr-defined]

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Answering, "127.0.0.1", 0)
        ready.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(serve())


class FloorServer:
    """The floor of a `GET /flow` probe on this machine, in the same run: an asyncio server
    in a process of its own, at the bench's priority as the sidecar is, that answers any
    request with the same bytes and does nothing else. A probe's answer from it that took
    over 50 ms was the machine's (no process to run it), not a server's work; `url`, after
    `start`."""

    def __init__(self, body: bytes) -> None:
        context = multiprocessing.get_context("fork")
        self._ready, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=_floor_server, daemon=True,
                                        args=(sending, body))
        self.url = ""

    def start(self) -> None:
        self._process.start()
        self.url = f"http://127.0.0.1:{self._ready.recv()}"

    @property
    def pid(self) -> int:
        """The server's process, once started."""
        return self._process.pid or 0

    def stop(self) -> None:
        self._process.kill()
        self._process.join()


def coinciding(slow: list[tuple[float, float]], floor: list[tuple[float, float]]) -> int:
    """How many of `slow` overlap in time one of `floor` (both sorted by start)."""
    count, i = 0, 0
    for began, ended in slow:
        while i < len(floor) and floor[i][1] < began:
            i += 1
        count += i < len(floor) and floor[i][0] <= ended
    return count


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def raise_fd_limit(connections: int) -> int:
    """Lift this process's open-file limit to fit `connections` sockets (up to the hard
    limit, which only root can raise); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, connections + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return wanted


@dataclass(frozen=True)
class Target:
    """The broker and sidecar a bench runs against."""

    management_url: str
    amqp_url: str
    user: str
    password: str
    sidecar_url: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Target:
        return cls(args.management_url.rstrip("/"), args.amqp_url, args.user, args.password,
                   args.sidecar_url and args.sidecar_url.rstrip("/"))

    @property
    def auth(self) -> tuple[str, str]:
        return self.user, self.password

    def amqp_login_url(self) -> str:
        """The AMQP URL, with --user/--password filled in when it names no user."""
        return login_url(self.amqp_url, self.user, self.password)

    def channel(self) -> pika.adapters.blocking_connection.BlockingChannel:
        return pika.BlockingConnection(pika.URLParameters(self.amqp_login_url())).channel()

    def sidecar_options(self) -> list[str]:
        """The flow-sidecar options that point it at this broker."""
        return ["--management-url", self.management_url, "--management-user", self.user,
                "--management-password", self.password, "--amqp-url", self.amqp_login_url()]

    @contextlib.contextmanager
    def sidecar(self, *options: str, prefix: str = "bench-") -> Iterator[Sidecar]:
        """A sidecar on this broker: `--sidecar-url`, or a process started with `options`
        and stopped at the end."""
        url = self.sidecar_url
        if url is not None:
            eventually(lambda: requests.get(url + "/healthz", timeout=2).ok)
            yield Sidecar(url, None)
            return
        process = SidecarProcess(Path(tempfile.mkdtemp(prefix=prefix)),
                                 *self.sidecar_options(), *options)
        process.start(wait_ready=False)  # the first poll of 10,000 queues takes a while
        eventually(lambda: requests.get(process.url + "/readyz", timeout=2).ok, timeout=180,
                   interval=0.5)
        assert process.proc is not None
        try:
            yield Sidecar(process.url, process.proc.pid)
        finally:
            process.stop()


@dataclass(frozen=True)
class Sidecar:
    """A running sidecar: its URL, and its process id when this bench started it."""

    url: str
    pid: int | None

    def proc_status(self, field: str) -> str:
        """A line's value from /proc/PID/status (`VmRSS`, `Threads`), or "unknown"."""
        if self.pid is None:
            return "unknown (not started here)"
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def open_files(self) -> str:
        """Its soft limit on open files, or "unknown"."""
        if self.pid is None:
            return "unknown (not started here)"
        for line in Path(f"/proc/{self.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return line.split()[3]
        return "unknown"
