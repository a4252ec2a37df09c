"""The README's five-minute tour, run as written against the real broker and a real
flow-sidecar: its flow-config commands, its producer script (only the queue's name and the
sidecar's address changed), the queue stopping and resuming, and the dashboard."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tests.integration.conftest import Broker
from tests.unit.test_docs import README, blocks
from tests.utils.sidecar_process import SidecarProcess, eventually

BIN = Path(sys.executable).parent


def tour_blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Using it"):text.index("## Layout")]
    return [body for language, body in blocks(section) if language == "sh"]


def env_for(sidecar: SidecarProcess) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    env["FLOW_SIDECAR_URL"] = sidecar.url
    return env


def flow(sidecar: SidecarProcess, queue: str) -> dict[str, object]:
    answer: dict[str, object] = requests.get(
        f"{sidecar.url}/flow/{quote(queue, safe='')}", timeout=5).json()
    return answer


def test_the_tour_runs_as_written(broker: Broker, qname: Callable[[str], str],
                                  shared_sidecar: SidecarProcess) -> None:
    if os.environ.get("FLOW_TEST_AMQP_URL") or os.environ.get("FLOW_TEST_MANAGEMENT_URL"):
        pytest.skip("the tour's producer uses the local broker, as a new user's does")
    start, thresholds, producer, watch = tour_blocks()
    assert start.strip() == "bash deploy/run.sh"
    queue = qname("tour")
    broker.created_queues.append(("/", queue))  # the script declares it; deleted after
    env = env_for(shared_sidecar)

    for line in thresholds.splitlines():
        words = [queue if w == "tour" else w for w in shlex.split(line, comments=True)]
        assert words[0] == ".venv/bin/flow-config"
        done = subprocess.run([str(BIN / "flow-config"), *words[1:]], capture_output=True,
                              text=True, env=env, timeout=30, check=False)
        assert done.returncode == 0, done.stderr

    script = re.search(r"<<'PY'\n(.*)\nPY", producer, re.DOTALL)
    assert script
    code = script.group(1).replace('"tour"', repr(queue))
    assert repr(queue) in code
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    try:
        eventually(lambda: flow(shared_sidecar, queue).get("flowStopped") is True, timeout=30)
        assert flow(shared_sidecar, queue)["flowStoppedCount"] == 1
        time.sleep(6)  # long enough for the first "delayed by 5s" line
        curl, show, purge = (shlex.split(line, comments=True) for line in watch.splitlines())
        assert curl[:2] == ["curl", "-s"] and show[1] == "show"
        # as root, as written; another user with sudo, as the README says
        assert purge == ["rabbitmqctl", "purge_queue", "tour"]
        if shutil.which("rabbitmqctl"):
            command = purge if os.geteuid() == 0 else ["sudo", *purge]
            subprocess.run([*command[:-1], queue], check=True, capture_output=True,
                           timeout=60)
        else:
            broker.api("DELETE", f"/api/queues/%2F/{quote(queue, safe='')}/contents")
        eventually(lambda: flow(shared_sidecar, queue).get("flowStopped") is False, timeout=30)
        eventually(lambda: flow(shared_sidecar, queue).get("flowStopped") is True, timeout=30)
        assert flow(shared_sidecar, queue)["flowStoppedCount"] == 2
    finally:
        process.kill()
        output, _ = process.communicate(timeout=10)
    assert "sent 11" in output and "sent 12" in output, output
    assert "Broker enforced flow control has been enforced" in output, output
    assert "Message send delayed by 5s due to broker enforced flow control" in output, output
    assert requests.get(f"{shared_sidecar.url}/ui", timeout=5).status_code == 200
