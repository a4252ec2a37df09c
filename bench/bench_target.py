"""Where a bench runs: which broker and which sidecar, from its command line.

Every bench of the HTTP side takes the same options, with the defaults they always had (the
local broker of deploy/ensure-rabbitmq.sh, a flow-sidecar process of its own):

    --management-url http://127.0.0.1:15672   --amqp-url amqp://127.0.0.1:5672/%2F
    --user guest --password guest             --sidecar-url URL (use a running sidecar)

`Target.sidecar()` starts a sidecar on that broker, or uses the one `--sidecar-url` names
(which must watch the same broker); `Target.channel()` is an AMQP channel on it.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.sidecar_process import SidecarProcess, eventually


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """The options that say which broker and sidecar the bench measures."""
    parser.add_argument("--management-url", default="http://127.0.0.1:15672",
                        help="the broker's management API")
    parser.add_argument("--amqp-url", default="amqp://127.0.0.1:5672/%2F",
                        help="the broker's AMQP listener (user and password from "
                             "--user/--password unless the URL has them)")
    parser.add_argument("--user", default="guest", help="the broker's user")
    parser.add_argument("--password", default="guest", help="its password")
    parser.add_argument("--sidecar-url", default=None,
                        help="a running flow-sidecar on that broker (default: start one)")


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
        parts = urlsplit(self.amqp_url)
        if parts.username is None:
            login = f"{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            parts = parts._replace(netloc=f"{login}@{parts.netloc}")
        return urlunsplit(parts)

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
