"""A real qpidd for the tests: found where deploy/ensure-qpidd.sh put it, started on a free
loopback port with its own data, pid and log files, stopped by its pid afterwards.

Where it comes from, first found wins: `FLOW_QPIDD` (a qpidd binary), the cache
`.cache/qpid/current` that deploy/ensure-qpidd.sh links (built from the Apache Qpid C++
source), a `qpidd` on PATH. `missing()` says why none can run (no qpidd, or no Python
proton client to speak QMF), so that the Qpid tests skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from sidecar.broker.qmf import QmfConsole, QmfError

REPO = Path(__file__).resolve().parents[2]
CACHED = REPO / ".cache" / "qpid" / "current"
# Ports the machine's RabbitMQ and Erlang use; the ephemeral range starts at 32768.
TAKEN = {4369, 5672, 15672, 25672}


def qpidd_binary() -> Path | None:
    """The qpidd to run, or None."""
    named = os.environ.get("FLOW_QPIDD")
    if named:
        return Path(named) if Path(named).is_file() else None
    if (CACHED / "sbin" / "qpidd").exists():
        return CACHED / "sbin" / "qpidd"
    found = shutil.which("qpidd") or shutil.which("qpidd", path="/usr/sbin:/usr/local/sbin")
    return Path(found) if found else None


def missing() -> str | None:
    """Why no qpidd can be driven here (None when one can)."""
    if qpidd_binary() is None:
        named = os.environ.get("FLOW_QPIDD")
        if named:
            return f"FLOW_QPIDD={named} is not a file"
        return ("no qpidd: run deploy/ensure-qpidd.sh (builds it from the Apache Qpid C++ "
                "source, FLOW_QPID_SOURCE or ../shared/qpid/qpid-cpp-src.tar.gz) or set "
                "FLOW_QPIDD")
    try:
        import proton  # noqa: F401
    except ImportError:
        return "no Python AMQP 1.0 client (proton): run deploy/ensure-qpidd.sh"
    return None


def free_port() -> int:
    """A free loopback port below the ephemeral range, not one RabbitMQ uses."""
    for port in range(21000 + os.getpid() % 9000, 31000):
        if port in TAKEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")


class Qpidd:
    """One qpidd process with the given broker options (e.g. default flow thresholds)."""

    def __init__(self, *options: str) -> None:
        binary = qpidd_binary()
        assert binary is not None, missing()
        self.dir = Path(tempfile.mkdtemp(prefix="flow-qpidd-"))
        self.port = free_port()
        self.url = f"amqp://127.0.0.1:{self.port}"
        self.log = self.dir / "qpidd.log"
        (self.dir / "qpidd.conf").write_text("# nothing from the install's own config\n")
        command = [str(binary), "--config", str(self.dir / "qpidd.conf"),
                   "--port", str(self.port), "--interface", "127.0.0.1", "--auth", "no",
                   "--data-dir", str(self.dir / "data"), "--pid-dir", str(self.dir),
                   "--log-enable", "info+", "--log-to-file", str(self.log),
                   "--log-to-stderr", "no", *options]
        modules = binary.parent.parent / "lib" / "qpid" / "daemon"
        if modules.is_dir():
            command[1:1] = ["--module-dir", str(modules)]
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE)
        except OSError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.console = QmfConsole(self.url, timeout=5)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode() if self.process.stderr else ""
                self.stop()
                raise RuntimeError(f"qpidd exited with {self.process.returncode}: {error}")
            try:
                self.console.query("broker")
                return
            except QmfError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop this qpidd (by its own pid) and remove its files."""
        self.console.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
