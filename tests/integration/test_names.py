"""Names at the broker's edges, for real: what RabbitMQ refuses is refused before anything
is stored, and control characters it accepts in names never reach the log raw."""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]


def test_a_name_the_broker_refuses_stores_nothing(
    broker: Broker, shared_sidecar: SidecarProcess
) -> None:
    # RabbitMQ's own API refuses the same name (its limit: 255 bytes of UTF-8)
    assert broker.api("PUT", queue_path("q" * 256).replace("/queues/", "/api/queues/"),
                      json={}).status_code == 400
    for name in ("q" * 256, "q" * 20_000, "a\r\nb"):
        r = shared_sidecar.put(queue_path(name) + "/flow", json={"qpid.flow_stop_count": 1})
        assert r.status_code == 400 and "queue name" in r.json()["detail"], r.text
    listed = shared_sidecar.get("/queues", params={"name": "q" * 256}).json()
    assert listed == []


def test_control_characters_in_a_queue_name_are_escaped_in_the_log(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = qname("ctl") + "\x00\x1b[2J"  # RabbitMQ accepts both in a name (not CR or LF)
    known(shared_sidecar, broker.declare(q, {"qpid.flow_stop_count": 1}))
    broker.publish(q, 2)
    assert wait_depth(shared_sidecar, q, 2)["flowStopped"] is True
    escaped = q.replace("\x00", "\\x00").replace("\x1b", "\\x1b")
    log = eventually(lambda: (text := shared_sidecar.log()) and f"qu({escaped})] QUE-1003"
                     in text and text)
    assert "\x00" not in log and "\x1b" not in log
