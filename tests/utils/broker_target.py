"""The broker the integration tests run against, from the environment.

Unset, it is the main RabbitMQ of deploy/ensure-rabbitmq.sh (AMQP 127.0.0.1:5672,
management :15672, guest/guest) and nothing changes. deploy/test.sh sets these to run the
same tests against a RabbitMQ 4.x node (`deploy/ensure-rabbitmq4.sh VERSION env` prints them):

    FLOW_TEST_AMQP_URL             amqp://user:pass@host:port/%2F
    FLOW_TEST_MANAGEMENT_URL       http://host:port
    FLOW_TEST_MANAGEMENT_USER      FLOW_TEST_MANAGEMENT_PASSWORD
    FLOW_TEST_PROMETHEUS_URL       http://host:port (rabbitmq_prometheus), when there is one
    FLOW_TEST_RABBITMQ4            4.0 or 4.3: the deploy/ensure-rabbitmq4.sh node (rabbitmqctl)

The names are the tests' own (FLOW_TEST_*): the sidecars the tests start get the target as
command-line options (`sidecar_args`), never through the environment.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pika

SCRIPT4 = Path(__file__).resolve().parents[2] / "deploy" / "ensure-rabbitmq4.sh"

MANAGEMENT_URL = os.environ.get(
    "FLOW_TEST_MANAGEMENT_URL",
    os.environ.get("FLOW_MANAGEMENT_URL", "http://127.0.0.1:15672")).rstrip("/")
AUTH = (os.environ.get("FLOW_TEST_MANAGEMENT_USER",
                       os.environ.get("FLOW_MANAGEMENT_USER", "guest")),
        os.environ.get("FLOW_TEST_MANAGEMENT_PASSWORD",
                       os.environ.get("FLOW_MANAGEMENT_PASSWORD", "guest")))
AMQP_URL = os.environ.get("FLOW_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
PROMETHEUS_URL = os.environ.get("FLOW_TEST_PROMETHEUS_URL", "").rstrip("/") or None
# Set by deploy/test.sh for a run against a node with management statistics denied.
STATISTICS_DENIED = os.environ.get("FLOW_TEST_STATISTICS_DENIED") == "1"
RETARGETED = "FLOW_TEST_MANAGEMENT_URL" in os.environ


def amqp_parameters(**options: object) -> pika.URLParameters:
    """pika parameters for the target's default vhost, with `options` (timeouts, name)."""
    parameters = pika.URLParameters(AMQP_URL)
    for name, value in options.items():
        setattr(parameters, name, value)
    return parameters


def sidecar_args(args: list[str]) -> list[str]:
    """The options that point a flow-sidecar at the target, unless `args` names a broker
    of its own (a test of another node or of bad credentials keeps its own)."""
    if not RETARGETED or "--management-url" in args:
        return []
    extra = ["--management-url", MANAGEMENT_URL, "--management-user", AUTH[0],
             "--management-password", AUTH[1]]
    if "--amqp-url" not in args:
        extra += ["--amqp-url", AMQP_URL]
    if PROMETHEUS_URL and "--prometheus-url" not in args:
        extra += ["--prometheus-url", PROMETHEUS_URL]
    return extra


class TargetNode:
    """The target broker as a test node (the shape of tests/utils/extra_node.ExtraNode):
    tests that need a node of their own (alarms, default statistics, live depth) use it
    when the suite runs against a 4.x node. `ctl`, `stop` and `start` go through
    deploy/ensure-rabbitmq4.sh (FLOW_TEST_RABBITMQ4 names the version); it is never hung
    (SIGSTOP): other tests share it."""

    def __init__(self) -> None:
        parts = urlsplit(AMQP_URL)
        self.amqp_port = parts.port or 5672
        self.amqp_url = AMQP_URL
        self.name = "rabbit4"  # rabbit4@localhost, as deploy/ensure-rabbitmq4.sh names it
        self.management_url = MANAGEMENT_URL
        self.auth = AUTH
        self.version = os.environ.get("FLOW_TEST_RABBITMQ4", "")

    def ctl(self, *args: str) -> str:
        """rabbitmqctl against the node."""
        return self._script("ctl", *args)

    def stop(self) -> None:
        """Stop the node (tests of a broker restart only; the 4.x passes of deploy/test.sh
        run them last)."""
        self._script("stop")

    def start(self) -> None:
        """Start it again with the configuration it had (RMQ4_DENY_STATS passes through)."""
        self._script("start")

    def _script(self, *args: str) -> str:
        if not self.version:
            raise RuntimeError("FLOW_TEST_RABBITMQ4 is not set: the target is no "
                               "deploy/ensure-rabbitmq4.sh node")
        done = subprocess.run(["bash", str(SCRIPT4), self.version, *args],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ensure-rabbitmq4.sh {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout
