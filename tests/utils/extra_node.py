"""An extra RabbitMQ node of this machine (deploy/rabbitmq-node.sh) that a test may stop,
hang (SIGSTOP), alarm or cluster without touching the main node the other tests use."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "rabbitmq-node.sh"


class ExtraNode:
    """Node `name`@host on loopback ports 5700+index (AMQP) and 15700+index (management)."""

    def __init__(self, name: str, index: int, *conf: str) -> None:
        self.name = name
        self.index = index
        self.conf = conf
        self.amqp_port = 5700 + index
        self.management_url = f"http://127.0.0.1:{15700 + index}"
        self.auth = ("guest", "guest")  # its config lets guest in from loopback

    def _run(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmq-node.sh {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    @property
    def amqp_url(self) -> str:
        """Its default vhost over AMQP as guest (its config lets guest in from loopback)."""
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    def start(self) -> ExtraNode:
        """Start it (or keep it running) with its config; returns once its API answers."""
        self._run("start", self.name, str(self.index), *self.conf)
        return self

    def stop(self) -> None:
        """Shut it down; returns once the node has exited."""
        self._run("stop", self.name)

    def ctl(self, *args: str) -> str:
        """rabbitmqctl against this node."""
        return self._run("ctl", self.name, *args)

    def pid(self) -> int:
        return int(Path(f"/var/lib/rabbitmq/flow-nodes/{self.name}/pid").read_text().strip())

    def hang(self) -> None:
        """SIGSTOP the node's VM: connections stay open, nothing answers."""
        os.kill(self.pid(), signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid(), signal.SIGCONT)
