"""`flow-sidecar` against a real qpidd, started as a user starts it (`--management-url
amqp://...`): it reports qpidd's own flow state (`flowSource: broker`) and adds what qpidd
lacks (/flow, long-poll, webhooks' events, history); thresholds are written by declaring
the queue, with qpidd's refusals passed on, and an existing queue's are refused (409)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.utils.flow import flow
from tests.utils.paths import flow_path, queue_path
from tests.utils.qpid_traffic import QueueUnderTest, Traffic
from tests.utils.sidecar_process import SidecarProcess, eventually


@pytest.fixture
def sidecar(tmp_path: Path, qpid: Callable[[str], Traffic]) -> Iterator[SidecarProcess]:
    """A flow-sidecar process polling the default qpidd every 0.2 s."""
    broker = qpid("default").broker
    proc = SidecarProcess(tmp_path / "sidecar", "--management-url", broker.url,
                          "--poll-interval", "0.2").start()
    yield proc
    proc.stop()


def test_reports_qpidds_own_flow_state(sidecar: SidecarProcess, qpid: Callable[[str], Traffic],
                                       qname: Callable[[], str]) -> None:
    traffic = qpid("default")
    name = qname()
    put = sidecar.put(queue_path(name) + "/flow",
                      json={"qpid.flow_stop_count": 3, "qpid.flow_resume_count": 2})
    assert put.status_code == 200, put.text
    assert put.json()["exists"] is True
    view = flow(sidecar, name)
    assert view["flowSource"] == "broker"
    assert view["thresholds"]["qpid.flow_stop_count"] == 3
    assert view["thresholds"]["qpid.flow_resume_count"] == 2
    assert view["sources"] == {"count": "arguments", "size": "default"}

    queue = QueueUnderTest(traffic, name)
    for _ in range(4):
        queue.enqueue(100)
    stopped = eventually(lambda: (v := flow(sidecar, name))["flowStopped"] and v)
    assert stopped["flowStoppedCount"] == 1 and stopped["depth"] == {"messages": 4,
                                                                     "bytes": 400}
    # long-poll: answers when qpidd resumes (depth 1, strictly below the resume of 2)
    queue.dequeue()
    queue.dequeue()
    assert flow(sidecar, name)["flowStopped"] is True
    queue.dequeue()
    waited = sidecar.get(flow_path(name), params={"since": stopped["version"], "wait": 10})
    assert waited.json()["flowStopped"] is False
    assert waited.json()["flowStoppedCount"] == 1
    assert "QUE-1004 : Underfull" in sidecar.log() or eventually(
        lambda: "QUE-1004 : Underfull" in sidecar.log())
    traffic.forget(name)


def test_thresholds_are_declared_or_refused_by_qpidd(
        sidecar: SidecarProcess, qname: Callable[[], str]) -> None:
    name = qname()
    refused = sidecar.put(queue_path(name) + "/flow", json={"qpid.flow_stop_size": 1000})
    assert refused.status_code == 422
    assert refused.json()["detail"] == [{
        "loc": ["body", "qpid.flow_resume_size"], "type": "value_error",
        "msg": "qpid.flow_resume_size=73400320 must be less or equal to "
               "qpid.flow_stop_size=1000"}]
    assert sidecar.get(flow_path(name)).status_code == 404  # not created

    assert sidecar.put(queue_path(name) + "/flow",
                       json={"qpid.flow_stop_count": 10}).status_code == 200
    again = sidecar.put(queue_path(name) + "/flow", json={"qpid.flow_stop_count": 20})
    assert again.status_code == 409
    assert "fixes flow thresholds when a queue is declared" in again.json()["detail"]
    assert flow(sidecar, name)["thresholds"]["qpid.flow_stop_count"] == 10


def test_flow_config_declares_through_the_sidecar(sidecar: SidecarProcess,
                                                  qname: Callable[[], str]) -> None:
    """`flow-config add` works as with qpid-config: on a new queue; an existing one says
    why not (exit 1, refused)."""
    name = qname()
    env = {**os.environ, "FLOW_SIDECAR_URL": sidecar.url}
    command = [str(Path(sys.executable).with_name("flow-config")), "add", name,
               "--flow-stop-count", "7", "--flow-resume-count", "3"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert flow(sidecar, name)["thresholds"]["qpid.flow_resume_count"] == 3
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 1
    assert "fixes flow thresholds when a queue is declared" in again.stderr + again.stdout


def test_flow_stopped_count_never_goes_down_when_qpidds_counter_restarts(
        sidecar: SidecarProcess, qpid: Callable[[str], Traffic],
        qname: Callable[[], str]) -> None:
    """qpidd's flowStoppedCount starts again from 0 with a queue declared anew (as with a
    qpidd restarted): the sidecar's counter keeps its history and moves on from there."""
    traffic = qpid("default")
    name = qname()
    limits = {"qpid.flow_stop_count": 2, "qpid.flow_resume_count": 1}
    assert sidecar.put(queue_path(name) + "/flow", json=limits).status_code == 200
    queue = QueueUnderTest(traffic, name)
    for _ in range(3):
        queue.enqueue(100)
    assert eventually(lambda: flow(sidecar, name)["flowStoppedCount"] == 1)
    traffic.forget(name)
    traffic.broker.console.call("delete", {"type": "queue", "name": name,
                                           "options": {"if_empty": False}})
    eventually(lambda: sidecar.get(flow_path(name)).status_code == 404)
    assert sidecar.put(queue_path(name) + "/flow", json=limits).status_code == 200
    again = eventually(lambda: (v := flow(sidecar, name))["depth"] is not None and v)
    assert (again["flowStoppedCount"], again["brokerFlowStoppedCount"]) == (1, 0)
    queue = QueueUnderTest(traffic, name)
    for _ in range(3):
        queue.enqueue(100)
    stopped = eventually(lambda: (v := flow(sidecar, name))["flowStopped"] and v)
    assert (stopped["flowStoppedCount"], stopped["brokerFlowStoppedCount"]) == (2, 1)
    traffic.forget(name)


def test_producer_classes_of_a_declaring_put_apply_to_qpidds_thresholds(
        sidecar: SidecarProcess, qpid: Callable[[str], Traffic],
        qname: Callable[[], str]) -> None:
    """qpidd knows no classes: the sidecar keeps them and stops a class at its fraction of
    the thresholds qpidd applies, while qpidd's own state goes on for everyone else."""
    traffic = qpid("default")
    name = qname()
    put = sidecar.put(queue_path(name) + "/flow", json={
        "qpid.flow_stop_count": 10, "qpid.flow_resume_count": 8,
        "producerClasses": {"bulk": 0.5}})
    assert put.status_code == 200, put.text
    queue = QueueUnderTest(traffic, name)
    for _ in range(6):
        queue.enqueue(100)
    bulk = eventually(lambda: (v := sidecar.get(flow_path(name), headers={
        "X-Producer-Class": "bulk"}).json())["flowStopped"] and v)
    assert bulk["flowStoppedBy"] == ["class:bulk"]
    plain = flow(sidecar, name)
    assert (plain["flowSource"], plain["flowStopped"]) == ("broker", False)
    traffic.forget(name)
