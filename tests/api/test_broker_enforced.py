"""In process, over a scripted broker that enforces flow control itself (as Qpid C++ and
Broker-J do): `/flow` reports the broker's state and says so (`flowSource`), and on a
broker that fixes thresholds at declare time a PUT declares the queue (or is refused)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sidecar.broker import BrokerError, BrokerRefused
from sidecar.flow.qpidd_rules import qpidd_resolution
from sidecar.flow.queue_limits import qpid_limits
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import BrokerFlow, QueueInfo
from tests.api.conftest import MakeAPI, ScriptedBroker
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


class DeclaringBroker(ScriptedBroker):
    """A scripted qpidd: queues carry its flow state; declares create them or are refused."""

    def __init__(self) -> None:
        super().__init__()
        self.refusal: Exception | None = None

    def report(self, name: str, messages: int, stopped: bool, count: int,
               arguments: Mapping[str, Any] | None = None) -> QueueInfo:
        args = dict(arguments or {})
        limits = qpid_limits(args)
        info = QueueInfo("/", name, messages, messages * 100, args, limits=limits,
                         broker_flow=BrokerFlow(stopped, count, qpidd_resolution(
                             args, limits, DefaultPolicy())))
        self.queues[("/", name)] = info
        return info

    def declare_queue(self, vhost: str, name: str, values: Mapping[str, int]) -> None:
        if self.refusal is not None:
            raise self.refusal
        self.report(name, 0, False, 0, values)


async def test_flow_reports_the_brokers_own_state(make_api: MakeAPI) -> None:
    broker = DeclaringBroker()
    api = await make_api(broker=broker)
    # depth 6 is above the stop of 5, but the broker says it is not stopped: the broker wins
    broker.report("fc", 6, False, 0, {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2})
    await api.poll()
    answer = (await api.client.get(flow_path("fc"))).json()
    assert (answer["flowSource"], answer["flowStopped"], answer["flowStoppedCount"]) == (
        "broker", False, 0)
    assert answer["thresholds"]["qpid.flow_stop_count"] == 5
    broker.report("fc", 7, True, 3, {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2})
    await api.poll()
    answer = (await api.client.get(flow_path("fc"))).json()
    assert (answer["flowStopped"], answer["flowStoppedCount"]) == (True, 3)
    assert answer["lastTransitionAt"] is not None


async def test_a_restarted_qpidds_counter_does_not_take_ours_down(make_api: MakeAPI) -> None:
    broker = DeclaringBroker()
    api = await make_api(broker=broker)
    limits = {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2}
    broker.report("fc", 7, True, 3, limits)
    await api.poll()
    broker.report("fc", 0, False, 0, limits)  # qpidd restarted: its counter too
    await api.poll()
    answer = (await api.client.get(flow_path("fc"))).json()
    assert (answer["flowStoppedCount"], answer["brokerFlowStoppedCount"]) == (3, 0)
    broker.report("fc", 7, True, 1, limits)
    await api.poll()
    answer = (await api.client.get(flow_path("fc"))).json()
    assert (answer["flowStoppedCount"], answer["brokerFlowStoppedCount"]) == (4, 1)


async def test_a_rabbitmq_queue_is_the_sidecars(make_api: MakeAPI) -> None:
    api = await make_api()
    api.broker.queue("rq", 6, 0, arguments={"qpid.flow_stop_count": 5})
    await api.poll()
    answer = (await api.client.get(flow_path("rq"))).json()
    assert (answer["flowSource"], answer["flowStopped"]) == ("sidecar", True)


async def test_put_declares_the_queue_on_the_broker(make_api: MakeAPI) -> None:
    broker = DeclaringBroker()
    api = await make_api(broker=broker)
    put = await api.client.put(queue_path("new") + "/flow", json={"flow_stop_count": 10})
    assert put.status_code == 200, put.text
    assert put.json()["exists"] is True
    assert put.json()["thresholds"]["qpid.flow_stop_count"] == 10
    assert api.engine.stored_settings(("/", "new")) is None  # the broker holds them

    again = await api.client.put(queue_path("new") + "/flow", json={"flow_stop_count": 20})
    assert again.status_code == 409
    assert "qpid-config del queue new" in again.json()["detail"]


async def test_put_keeps_the_classes_and_applies_them_to_the_brokers_thresholds(
        make_api: MakeAPI) -> None:
    broker = DeclaringBroker()
    api = await make_api(broker=broker)
    body = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80,
            "producerClasses": {"bulk": 0.5}}
    bad = await api.client.put(queue_path("new") + "/flow",
                               json={**body, "producerClasses": {"bulk": 2}})
    assert bad.status_code == 422 and ("/", "new") not in broker.queues  # nothing declared
    assert "producerClasses" in str(bad.json()["detail"][0]["loc"])
    put = await api.client.put(queue_path("new") + "/flow", json=body)
    assert put.status_code == 200, put.text
    assert api.engine.stored_classes(("/", "new")) == {"bulk": 0.5}
    broker.report("new", 60, False, 0, {k: v for k, v in body.items() if k.startswith("qpid")})
    await api.poll()
    bulk = (await api.client.get(flow_path("new"), headers={"X-Producer-Class": "bulk"})).json()
    plain = (await api.client.get(flow_path("new"))).json()
    assert (bulk["flowStopped"], plain["flowStopped"]) == (True, False)


@pytest.mark.parametrize(("error", "status", "loc"), [
    (BrokerRefused("qpid.flow_resume_count=10 must be less or equal to "
                   "qpid.flow_stop_count=5"), 422, ["body", "qpid.flow_resume_count"]),
    (BrokerRefused("invalid conversion: Cannot convert from int64 to uint32"), 422,
     ["body", "body"]),
    (BrokerError("cannot connect to qpidd"), 503, None),
])
async def test_put_passes_the_brokers_refusal_on(make_api: MakeAPI, error: Exception,
                                                 status: int, loc: list[str] | None) -> None:
    broker = DeclaringBroker()
    broker.refusal = error
    api = await make_api(broker=broker)
    put = await api.client.put(queue_path("bad") + "/flow",
                               json={"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 10})
    assert put.status_code == status
    if loc is not None:
        assert put.json()["detail"][0]["loc"] == loc
        assert put.json()["detail"][0]["msg"] == str(error)
    assert (await api.client.get(queue_path("bad"))).status_code == 404
