"""What the real publisher tells operators and the sidecar: Qpid's client log lines while
blocked and at the timeout, and leaving the sidecar's registry when it closes."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import pytest

from flow_sidecar_client.publisher import FlowControlledPublisher, FlowControlTimeout
from tests.integration.conftest import Broker
from tests.integration.test_publisher import CLIENT
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

ENFORCED = "Broker enforced flow control has been enforced"
DELAYED = "Message send delayed by"
FAILED = "Message send failed due to timeout waiting on broker enforced flow control"


def test_qpid_client_lines_first_warn_delays_then_error(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher],
        caplog: pytest.LogCaptureFixture) -> None:
    queue = known(shared_sidecar, broker.declare(qname("lines"), {"qpid.flow_stop_count": 2}))
    broker.publish(queue, 3)
    eventually(lambda: flow(shared_sidecar, queue)["flowStopped"])
    publisher = publishers(queue, capacity=5, sidecar_url=shared_sidecar.url,
                           flow_control_wait_notify_period=200, flow_control_wait_failure=700)
    caplog.set_level(logging.WARNING, logger=CLIENT)
    with pytest.raises(FlowControlTimeout):
        publisher.publish(b"held back")
    with pytest.raises(FlowControlTimeout):
        publisher.publish(b"still held back")  # the same stop: no second first warning
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == CLIENT]
    once = [("WARNING", ENFORCED),
            *((("WARNING", f"{DELAYED} {s}s due to broker enforced flow control"))
              for s in ("0.2", "0.4", "0.6")),
            ("ERROR", FAILED)]
    assert lines == once + once[1:]


def test_a_closed_publisher_leaves_the_registry_at_once(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    """Its capacity leaves overflowRisk now, not after --producer-ttl, and the long-poll it
    left parked brings no CHN-1006 when flow resumes."""
    queue = known(shared_sidecar, broker.declare(qname("leave"), {
        "qpid.flow_stop_count": 3, "x-max-length": 5, "x-overflow": "reject-publish"}))
    producer = f"leaver-{uuid.uuid4().hex[:8]}"
    publisher = publishers(queue, capacity=4, producer_id=producer,
                           sidecar_url=shared_sidecar.url)

    def view() -> dict[str, object]:
        answer: dict[str, object] = shared_sidecar.get(queue_path(queue)).json()
        return answer

    registered = eventually(lambda: (v := view())["activeProducers"] and v)
    assert registered["overflowRisk"] is True  # stop 3 + capacity 4 > max-length 5
    broker.publish(queue, 4)
    wait_depth(shared_sidecar, queue, 4)
    eventually(lambda: f"[producer({producer})] CHN-1005" in shared_sidecar.log())
    eventually(lambda: publisher.flow_stopped)  # its long-poll is parked on the stop

    publisher.close()
    after = view()
    assert after["activeProducers"] == [] and after["overflowRisk"] is False
    broker.drain(queue, 4)
    wait_depth(shared_sidecar, queue, 0, stopped=False)
    time.sleep(0.5)  # the parked long-poll answers at the resume
    assert view()["activeProducers"] == []
    assert f"[producer({producer})] CHN-1006" not in shared_sidecar.log()


def test_a_byte_window_is_declared_and_judged_against_max_length_bytes(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    """`max_message_bytes` bounds the bytes in flight at capacity × max_message_bytes,
    which the publisher declares (X-Producer-Capacity-Bytes) for overflowRisk in bytes."""
    queue = known(shared_sidecar, broker.declare(qname("bytes"), {
        "qpid.flow_stop_size": 800, "x-max-length-bytes": 1000,
        "x-overflow": "reject-publish"}))
    publisher = publishers(queue, capacity=4, max_message_bytes=100,
                           sidecar_url=shared_sidecar.url)
    answer = eventually(lambda: (v := shared_sidecar.get(queue_path(queue)).json())
                        ["activeProducers"] and v)
    assert answer["activeProducers"][0]["capacityBytes"] == 400
    assert answer["overflowRisk"] is True and answer["overflowRiskUnjudged"] is None
    assert answer["overflowRiskDetail"] == (
        "stop 800 bytes + active producers' capacity 400 bytes = 1200 bytes > "
        "max-length-bytes 1000")
    with pytest.raises(ValueError, match="over max_message_bytes=100"):
        publisher.publish(b"x" * 101)
    publisher.publish(b"x" * 100)
    publisher.flush(5)


def test_with_a_producer_token_the_publisher_registers_asks_and_leaves(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess],
        publishers: Callable[..., FlowControlledPublisher],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sidecar = sidecar_factory("--producer-token", "p-secret").start()
    queue = known(sidecar, broker.declare(qname("guarded"), {"qpid.flow_stop_count": 50}))
    monkeypatch.setenv("FLOW_PRODUCER_TOKEN", "p-secret")
    producer = f"guarded-{uuid.uuid4().hex[:8]}"
    publisher = publishers(queue, capacity=4, producer_id=producer, sidecar_url=sidecar.url)
    publisher.publish(b"granted and sent")  # through a credit grant (grants="auto")
    assert producer in sidecar.get(f"/grants/%2F/{queue}").json()["producers"]
    assert eventually(lambda: sidecar.get(queue_path(queue)).json()["activeProducers"])
    publisher.close()
    assert sidecar.get(queue_path(queue)).json()["activeProducers"] == []
    wait_depth(sidecar, queue, 1)
    refused = sidecar.get(f"/flow/%2F/{queue}", headers={"X-Producer-Id": "intruder"})
    assert refused.status_code == 401
