"""Producer classes against the real RabbitMQ: a class stops its producers at its fraction
of the queue's thresholds and resumes them under its resume, while producers with no class
go on; its grants stay below its own stop; flow-config sets them, and a refused fraction
names its field
(docs/graded-flow.md#producer-classes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from flow_sidecar_client import FlowControlledPublisher
from flow_sidecar_client.aio import FlowControlledPublisher as AioPublisher
from tests.integration.conftest import Broker
from tests.integration.test_cli_and_security import flow_config
from tests.utils.broker_target import AMQP_URL
from tests.utils.flow import known
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]
BULK = {"X-Producer-Class": "bulk"}


def told(sidecar: SidecarProcess, queue: str, headers: dict[str, str] | None = None
         ) -> dict[str, Any]:
    answer: dict[str, Any] = sidecar.get(flow_path(queue), headers=headers).json()
    return answer


def test_a_bulk_class_stops_first_and_resumes_under_its_resume(
        broker: Broker, shared_sidecar: SidecarProcess, qname: Names,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    sidecar = shared_sidecar
    q = known(sidecar, broker.declare(qname("classes")))
    bad = flow_config(sidecar, "add", q, "--flow-stop-count", "100", "--flow-resume-count",
                      "80", "--producer-class", "bulk=1.5")
    assert bad.returncode == 1 and "producerClasses.bulk" in bad.stderr, bad.stderr
    done = flow_config(sidecar, "add", q, "--flow-stop-count", "100", "--flow-resume-count",
                       "80", "--producer-class", "bulk=0.5")
    assert done.returncode == 0 and "producer class bulk (0.5): ok" in done.stdout, done.stdout
    assert sidecar.get(queue_path(q)).json()["settings"]["producerClasses"] == {"bulk": 0.5}
    bulk_publisher = publishers(q, producer_class="bulk", capacity=5,
                                sidecar_url=sidecar.url, poll_wait=5)
    plain_publisher = publishers(q, capacity=5, sidecar_url=sidecar.url, poll_wait=5)
    assert not bulk_publisher.flow_stopped and not plain_publisher.flow_stopped
    broker.publish(q, 60)
    stopped = eventually(lambda: (a := told(sidecar, q, BULK))["flowStopped"] and a)
    assert stopped["flowStoppedBy"] == ["class:bulk"]
    assert told(sidecar, q)["flowStopped"] is False  # no class: the queue's own answer
    eventually(lambda: bulk_publisher.flow_stopped)  # its watch says its class
    assert not plain_publisher.flow_stopped

    async def aio_told() -> tuple[bool, bool]:  # one long poll per class: each told its own
        async with AioPublisher(q, amqp=AMQP_URL, sidecar_url=sidecar.url,
                                producer_class="bulk") as bulk, \
                AioPublisher(q, amqp=AMQP_URL, sidecar_url=sidecar.url) as plain:
            return bulk.flow_stopped, plain.flow_stopped

    assert asyncio.run(aio_told()) == (True, False)
    # a grant to bulk: at most the headroom below its stop (50), whatever it asks
    grant = sidecar.http.post(f"{sidecar.url}/grants/%2F/{q}", timeout=10, json={"messages": 500, "bytes": 10**6},
                         headers={"X-Producer-Id": "bulk-1", **BULK}).json()
    assert grant["messages"] == 0 and grant["grantId"] is None
    view = sidecar.get(queue_path(q)).json()
    assert view["classes"]["bulk"]["flowStopped"] is True
    assert view["classes"]["bulk"]["thresholds"]["qpid.flow_stop_count"] == 50
    broker.drain(q, 25)  # 35: under the class's resume (40)
    eventually(lambda: not told(sidecar, q, BULK)["flowStopped"], timeout=30)
    eventually(lambda: not bulk_publisher.flow_stopped)
    bulk_publisher.publish(b"again")  # and it sends
    bulk_publisher.close()  # giving back the credit it holds: 15 free below 50 otherwise
    # it may hold all of (its grants are sized by its rate)

    def granted() -> dict[str, Any] | None:
        made: dict[str, Any] = sidecar.http.post(
            f"{sidecar.url}/grants/%2F/{q}", timeout=10, json={"messages": 500, "bytes": 10**6},
            headers={"X-Producer-Id": "bulk-1", **BULK}).json()
        return made if made["messages"] > 0 else None

    assert eventually(granted)["messages"] <= 50 - 36
