"""The Node producer of docs/producers.md (examples/node, amqplib from npm), against the real
sidecar and broker: it waits while its queue is flow stopped, sends nothing meanwhile, and
sends once the queue flows (Node and its packages: deploy/ensure-node.sh)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import Broker
from tests.utils.broker_target import AMQP_URL
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node"


@pytest.fixture(scope="module")
def node_example() -> Path:
    done = subprocess.run(["bash", str(ROOT / "deploy" / "ensure-node.sh")], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return EXAMPLE


def depth(sidecar: SidecarProcess, queue: str) -> int:
    return int(sidecar.get(flow_path(queue)).json()["depth"]["messages"])


def test_the_node_producer_waits_while_stopped_and_sends_after(
        node_example: Path, broker: Broker, qname: Callable[[str], str],
        shared_sidecar: SidecarProcess, tmp_path: Path) -> None:
    queue = qname("node")
    broker.channel.queue_declare(queue, durable=True)  # as the producer declares it
    broker.created_queues.append(("/", queue))
    answer = shared_sidecar.put(queue_path(queue) + "/flow", json={
        "qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5})
    assert answer.status_code == 200, answer.text
    broker.publish(queue, 11)
    eventually(lambda: shared_sidecar.get(flow_path(queue)).json().get("flowStopped"), timeout=30)

    producer_output = tmp_path / "producer.log"

    env = {**os.environ, "FLOW_SIDECAR_URL": shared_sidecar.url, "AMQP_URL": AMQP_URL}
    with open(producer_output, "wb") as out:
        process = subprocess.Popen(["node", "producer.js", queue, "20"], cwd=node_example,
                                   env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: "waiting" in producer_output.read_text() or process.poll() is not None,
                   timeout=30)
        assert process.poll() is None, producer_output.read_text()
        time.sleep(3)  # a poll and more: nothing is sent while the queue is stopped
        assert "sent" not in producer_output.read_text()
        assert process.poll() is None
        assert depth(shared_sidecar, queue) == 11

        broker.drain(queue, 11)  # depth 0 < resume 5: the queue flows
        assert process.wait(60) == 0, producer_output.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    output = producer_output.read_text()
    assert output.index("flow stopped at 11 messages: waiting") < output.index("sent 1\n"), output
    assert "sent 20" in output, output
    # every message confirmed before it exits: all 20 are on the queue
    eventually(lambda: broker.api("GET", f"/api/queues/%2F/{queue}").json().get("messages") == 20,
               timeout=30)
