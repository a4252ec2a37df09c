"""Broker-wide flow control for real: a RabbitMQ node of its own (deploy/rabbitmq-node.sh,
index 3, never the shared broker) gets real disk and memory alarms and a vhost filled and
drained with real messages, each watched through a real flow-sidecar process, and the
alarm through the live dashboard in a real Chromium. When the suite targets a 4.x node
(tests/utils/broker_target.py) the alarms are raised on that node (limits reset after)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pika
import pytest
import requests

from tests.integration.test_cli_and_security import flow_config
from tests.utils.broker_target import RETARGETED, TargetNode
from tests.utils.extra_node import ExtraNode
from tests.utils.flow import flow, known
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webdriver import chromium

STATS = ("collect_statistics_interval = 1000",  # as deploy/rabbitmq.conf: depth in ~1 s
         "management.sample_retention_policies.global.minute = 1",
         "management.sample_retention_policies.basic.minute = 1",
         "management.sample_retention_policies.detailed.10 = 1")
WAIT = 30.0  # seconds: loose, the machine is shared; the measured times are printed


class NodeBroker:
    """AMQP and management API of the test node, in one vhost; deletes what it made."""

    def __init__(self, node: ExtraNode | TargetNode, vhost: str = "/") -> None:
        self.node = node
        self.vhost = vhost
        self.http = requests.Session()
        self.http.auth = node.auth
        self.connection: pika.BlockingConnection | None = None
        self.queues: list[str] = []

    def api(self, method: str, path: str, **kw: object) -> requests.Response:
        return self.http.request(method, self.node.management_url + path, timeout=10,
                                 **kw)  # type: ignore[arg-type]

    def channel(self) -> pika.adapters.blocking_connection.BlockingChannel:
        if self.connection is None:
            self.connection = pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", self.node.amqp_port, self.vhost, pika.PlainCredentials(
                    *self.node.auth), blocked_connection_timeout=60,
                client_properties={"connection_name": "flow-sidecar broker-wide tests"}))
        return self.connection.channel()

    def declare(self, name: str) -> str:
        self.channel().queue_declare(name, durable=False)
        self.queues.append(name)
        return name

    def cleanup(self) -> None:
        if self.connection is not None and self.connection.is_open:
            self.connection.close()
        for name in self.queues:
            self.api("DELETE", f"/api/queues/{quote(self.vhost, safe='')}/{quote(name, safe='')}")


@pytest.fixture(scope="module")
def node() -> Iterator[ExtraNode | TargetNode]:
    """The node, started once for this file and stopped after it (limits reset first, in
    case a test failed with an alarm raised); the shared 4.x target is left running."""
    started = TargetNode() if RETARGETED else ExtraNode("flowquota", 3, *STATS).start()
    try:
        yield started
    finally:
        started.ctl("set_disk_free_limit", "50MB")
        started.ctl("set_vm_memory_high_watermark", "0.4")
        if isinstance(started, ExtraNode):
            started.stop()


@pytest.fixture
def on_node(node: ExtraNode | TargetNode) -> Iterator[NodeBroker]:
    made = NodeBroker(node)
    yield made
    made.cleanup()


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:6]


def sidecar_for(factory: Callable[..., SidecarProcess], node: ExtraNode | TargetNode,
                data_dir: Path | None = None) -> SidecarProcess:
    return factory("--management-url", node.management_url, "--management-user", node.auth[0],
                   "--management-password", node.auth[1], "--amqp-url", node.amqp_url,
                   "--poll-interval", "0.2", data_dir=data_dir).start()


def timed(check: Callable[[], object]) -> float:
    """Seconds until `check` holds (fails after WAIT)."""
    started = time.monotonic()
    eventually(check, timeout=WAIT)
    return time.monotonic() - started


def drain(channel: pika.adapters.blocking_connection.BlockingChannel, queues: list[str],
          count: int) -> None:
    for q in queues:
        for _ in range(count):
            assert channel.basic_get(q, auto_ack=True)[0] is not None, q


def page(browser: object, script: str, *args: object) -> object:
    return browser.run(script, *args)  # type: ignore[attr-defined]


BANNER_JS = """const b = document.getElementById("broker-wide");
return b.hidden ? null : b.textContent;"""
WHY_JS = """const tr = [...document.querySelectorAll("#queues tbody tr")]
  .find((row) => row.dataset.queue === arguments[0]);
const why = tr && tr.querySelector(".why");
return why && !why.hidden ? why.textContent : null;"""


def test_disk_alarm_stops_every_queue_live_on_flow_and_dashboard(
        node: ExtraNode | TargetNode, on_node: NodeBroker,
        sidecar_factory: Callable[..., SidecarProcess],
        tag: str, tmp_path: Path) -> None:
    sidecar = sidecar_for(sidecar_factory, node)
    queues = [known(sidecar, on_node.declare(f"alarm-{n}-{tag}")) for n in "ab"]
    assert not any(flow(sidecar, q)["flowStopped"] for q in queues)
    with chromium(tmp_path, "--window-size=1280,500") as browser:
        browser.open(f"{sidecar.url}/ui?filter={tag}")
        eventually(lambda: page(browser, "return document.querySelectorAll("
                                         "'#queues tbody tr').length") == 2)
        node.ctl("set_disk_free_limit", "1000GB")  # more than this disk has: alarm
        raised = timed(lambda: all(flow(sidecar, q)["flowStopped"] for q in queues))
        answer = flow(sidecar, queues[0])
        assert answer["flowStoppedBy"] == ["broker-alarm"], answer
        assert answer["flowStopReasons"][0]["detail"].startswith(f"disk alarm on node {node.name}@")
        assert answer["flowStoppedCount"] == 0 and not answer["measuredFlowStopped"]
        alarms = sidecar.get("/alarms").json()["alarms"]
        assert [(a["node"].split("@")[0], a["resource"]) for a in alarms] == [
            (node.name, "disk")]
        routed = sidecar.get("/flow/exchange/%2F/amq.direct",
                             params={"routing_key": "bound-to-nothing"}).json()
        assert routed["flowStopped"] and routed["flowStoppedBy"] == ["broker-alarm"]
        banner = eventually(lambda: page(browser, BANNER_JS), timeout=WAIT)
        assert f"disk alarm on node {node.name}@" in str(banner), banner
        assert eventually(lambda: page(browser, WHY_JS, queues[0])) == "by broker alarm"

        node.ctl("set_disk_free_limit", "50MB")
        cleared = timed(lambda: not any(flow(sidecar, q)["flowStopped"] for q in queues))
        eventually(lambda: page(browser, BANNER_JS) is None, timeout=WAIT)
    assert flow(sidecar, queues[0])["flowStoppedBy"] == []
    log = sidecar.log()
    assert "disk alarm raised" in log and "disk alarm cleared" in log
    print(f"\ndisk alarm: /flow stopped {raised:.2f}s after rabbitmqctl, flowing again "
          f"{cleared:.2f}s after it was cleared")


def test_memory_alarm_stops_producers_and_is_exported(
        node: ExtraNode | TargetNode, on_node: NodeBroker,
        sidecar_factory: Callable[..., SidecarProcess],
        tag: str) -> None:
    sidecar = sidecar_for(sidecar_factory, node)
    queue = known(sidecar, on_node.declare(f"memory-{tag}"))
    node.ctl("set_vm_memory_high_watermark", "0.0001")  # far below what the node uses
    raised = timed(lambda: flow(sidecar, queue)["flowStopped"])
    reason = flow(sidecar, queue)["flowStopReasons"][0]
    assert reason["by"] == "broker-alarm" and reason["detail"].startswith("memory alarm")
    assert 'resource="memory"} 1.0' in sidecar.get("/metrics").text
    node.ctl("set_vm_memory_high_watermark", "0.4")
    cleared = timed(lambda: not flow(sidecar, queue)["flowStopped"])
    print(f"\nmemory alarm: /flow stopped {raised:.2f}s after rabbitmqctl, flowing again "
          f"{cleared:.2f}s after")


def test_vhost_quota_with_real_messages_survives_kill_9(
        node: ExtraNode | TargetNode, sidecar_factory: Callable[..., SidecarProcess], tag: str,
        tmp_path: Path) -> None:
    vhost = f"quota-{tag}"
    path = f"/vhosts/{quote(vhost, safe='')}"
    admin = NodeBroker(node)
    assert admin.api("PUT", f"/api/vhosts/{vhost}").status_code in (201, 204)
    in_vhost = NodeBroker(node, vhost)
    try:
        admin.api("PUT", f"/api/permissions/{vhost}/{node.auth[0]}",
                  json={"configure": ".*", "write": ".*", "read": ".*"})
        sidecar = sidecar_for(sidecar_factory, node, tmp_path / "data")
        queues = [known(sidecar, in_vhost.declare(f"q{n}"), vhost) for n in (1, 2)]
        channel = in_vhost.channel()
        for q in queues:
            for _ in range(10):
                channel.basic_publish("", q, b"x" * 1000)
        eventually(lambda: sidecar.get(path).json()["depth"]["bytes"] == 20000, timeout=WAIT)
        refused = flow_config(sidecar, "vhost-quota", "--vhost", vhost, "--overfull-size",
                              "5", "--underfull-size", "6")
        assert refused.returncode == 1 and ("underfullSize=6 must be less or equal to "
                                            "overfullSize=5") in refused.stderr
        done = flow_config(sidecar, "vhost-quota", "--vhost", vhost, "--store-overfull-size",
                           "15000", "--store-underfull-size", "8000")  # Broker-J's names
        assert done.returncode == 0, done.stderr
        assert f"{vhost}  2" in done.stdout and "15,000/8,000" in done.stdout
        assert "OVERFULL" in done.stdout and "stopped by: vhost" in done.stdout
        for q in queues:
            answer = flow(sidecar, q, vhost)
            assert answer["flowStopped"] and answer["flowStoppedBy"] == ["vhost-quota"]
        assert f"[vh({vhost})/ms(queues)] MST-1008 : Store overfull" in sidecar.log()
        assert sidecar.put("/vhosts/no-such-vhost-here/quota",
                           json={"overfullSize": 1}).status_code == 404
        drain(channel, queues, 5)  # 10,000 bytes: between underfull and overfull, it holds
        eventually(lambda: sidecar.get(path).json()["depth"]["bytes"] == 10000, timeout=WAIT)
        assert flow(sidecar, queues[0], vhost)["flowStopped"]

        sidecar.kill()  # kill -9: the quota, the state and its counter are on disk
        sidecar = sidecar_for(sidecar_factory, node, tmp_path / "data")
        view = sidecar.get(path).json()  # a fresh process would call 10,000 underfull
        assert view["quota"]["overfullSize"] == 15000 and view["storeOverfull"], view
        assert view["storeOverfullCount"] == 1 and view["depth"]["bytes"] == 10000, view
        assert flow(sidecar, queues[0], vhost)["flowStoppedBy"] == ["vhost-quota"]

        drain(channel, queues, 2)  # 3 messages each: 6,000 bytes, under 8,000
        resumed = timed(lambda: not any(flow(sidecar, q, vhost)["flowStopped"]
                                        for q in queues))
        assert "MST-1009 : Store overfull condition cleared" in sidecar.log()
        # bytes and messages may refresh a round apart (4.3 has shown the bytes first)
        listed = eventually(lambda: (out := flow_config(sidecar, "vhosts").stdout.splitlines())
                            and [line.split()[:8] for line in out if line.startswith(vhost)]
                            == [[vhost, "2", "6", "6,000", "15,000/8,000", "-/-", "ok", "1"]]
                            and out, timeout=WAIT)
        assert listed[0].split()[:4] == ["vhost", "queues", "messages", "bytes"]
        done = flow_config(sidecar, "vhost-defaults", "--vhost", vhost, "--capacity", "4000",
                           "--flow-resume-capacity", "3000")
        assert done.returncode == 0 and "stop_size=4,000, resume_size=3,000" in done.stdout
        answer = flow(sidecar, queues[0], vhost)  # 3,000 bytes: under its new stop
        assert answer["sources"]["size"] == "vhost"
        assert answer["thresholds"]["qpid.flow_stop_size"] == 4000
        print(f"\nvhost quota: flowing {resumed:.2f}s after the drain")
    finally:
        in_vhost.cleanup()
        admin.api("DELETE", f"/api/vhosts/{vhost}")
