"""Start `flow-sidecar` as a real process, the way a user does, for integration tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import requests

from tests.utils.broker_target import sidecar_args

BIN = Path(sys.executable).with_name("flow-sidecar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(check: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Retry `check` until it returns something truthy; fail with its last value or error."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if last:
                return last
        except (AssertionError, requests.RequestException) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s; last: {last!r}")
        time.sleep(interval)


class SidecarProcess:
    """One flow-sidecar process with its own port and data directory, on the tests' target
    broker unless its arguments name another."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None,
                 program: list[str] | None = None) -> None:
        """`program`: the command that runs flow-sidecar (another version's, for a bench's
        baseline), this checkout's by default."""
        self.data_dir = data_dir
        self.program = program or [str(BIN)]
        self.args = list(args)
        self.env = env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir / "sidecar.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = requests.Session()

    def start(self, wait_ready: bool = True) -> SidecarProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
        if "--management-url" not in self.args:
            # the test broker runs deploy/rabbitmq.conf's 1 s statistics, which lag about
            # 2 s (the default, 10 s, is for RabbitMQ's own 5 s); other brokers get the
            # default unless a test says otherwise
            env["FLOW_BROKER_STATS_LAG"] = "3"
        env.update(self.env)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.program, "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", str(self.data_dir),
             *sidecar_args(self.args), *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
        log.close()
        if wait_ready:
            eventually(lambda: self.http.get(self.url + "/readyz", timeout=1).ok, timeout=20)
        return self

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.http.get(self.url + path, timeout=10, **kw)

    def put(self, path: str, **kw: Any) -> requests.Response:
        return self.http.put(self.url + path, timeout=10, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self.http.delete(self.url + path, timeout=10, **kw)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
