"""Broker-wide flow control through the API, in process over a scripted broker: vhost
quotas and defaults (writes, refusals, 404s), broker alarms, and every `/flow` answer,
cached or long-polled, that they change."""

from __future__ import annotations

import asyncio
import copy
from typing import Any
from urllib.parse import quote

import pytest

from sidecar.flow.broker_alarms import NodeStatus
from tests.api.conftest import InProcessAPI
from tests.api.test_answers import make_with_disk_full
from tests.unit.test_broker_j import RECORDED
from tests.unit.test_broker_j import adapter as broker_j_adapter
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio
ROOT_QUOTA = "/vhosts/%2F/quota"


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"overfullSize": -1}, "overfullSize", "overfullSize=-1 must be an integer >= 0"),
    ({"overfullSize": 500, "underfullSize": 600}, "underfullSize",
     "underfullSize=600 must be less or equal to overfullSize=500"),
    ({"storeOverfullSize": 500, "storeUnderfullSize": 600}, "underfullSize",  # Broker-J
     "underfullSize=600 must be less or equal to overfullSize=500"),
    ({"underfullSize": 600}, "underfullSize", "needs overfullSize"),
    ({"overfullMessages": 10, "underfullMessages": -2}, "underfullMessages",
     "underfullMessages=-2 must be an integer >= 0"),
    ({}, "overfullSize", "a quota needs overfullSize or overfullMessages"),
    ({"overfullSize": 2**63}, "overfullSize", "must be at most"),
    ({"overfullSize": "500"}, "overfullSize", "valid integer"),
    ({"overfullSize": 500, "overfulSize": 5}, "overfulSize", "Extra inputs"),
])
async def test_refused_quotas_are_422_naming_the_field(api: InProcessAPI, body: Any,
                                                       field: str, message: str) -> None:
    r = await api.client.put(ROOT_QUOTA, json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"][-1] == field and message in detail["msg"]
    assert api.engine.broker_wide.quota("/") is None
    assert api.engine.store.load_vhost_settings("quota") == {}


async def test_a_quota_takes_whole_number_floats_as_the_other_routes_do(
        api: InProcessAPI) -> None:
    r = await api.client.put(ROOT_QUOTA, json={"overfullSize": 5000.0, "underfullSize": 4e3})
    assert r.status_code == 200, r.text
    assert api.engine.broker_wide.quota("/") == {"overfullSize": 5000, "underfullSize": 4000}
    r = await api.client.put(ROOT_QUOTA, json={"overfullSize": 5000.5})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "overfullSize"


async def test_unknown_vhost_is_404_and_an_unreadable_broker_503(api: InProcessAPI) -> None:
    r = await api.client.put("/vhosts/nowhere/quota", json={"overfullSize": 5})
    assert r.status_code == 404 and "'nowhere' is not known to the broker" in r.text
    assert (await api.client.put("/vhosts/nowhere/defaults",
                                 json={"capacity": 5})).status_code == 404
    assert (await api.client.get("/vhosts/nowhere")).status_code == 404
    assert (await api.client.delete("/vhosts/%2F/quota")).status_code == 404
    api.broker.failure = "connection refused"
    r = await api.client.put(ROOT_QUOTA, json={"overfullSize": 5})
    assert r.status_code == 503 and "nothing was changed" in r.text
    assert api.engine.broker_wide.quota("/") is None


async def test_quota_stops_every_queue_of_the_vhost_and_the_cache_follows(
        api: InProcessAPI) -> None:
    api.broker.queue("a", 5, 400)
    api.broker.queue("b", 5, 500)
    api.broker.queue("c", 5, 9000, vhost="v2")
    await api.poll()
    before = await api.client.get(flow_path("a"))  # cached by the fast path
    assert before.json()["flowStoppedBy"] == [] and before.json()["flowStopReasons"] == []
    r = await api.client.put(ROOT_QUOTA, json={"storeOverfullSize": 800,
                                               "storeUnderfullSize": 600})
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["quota"] == {"overfullSize": 800, "underfullSize": 600,
                             "overfullMessages": None, "underfullMessages": None}
    assert view["storeOverfull"] and view["storeOverfullCount"] == 1
    assert view["depth"] == {"messages": 10, "bytes": 900} and view["queues"] == 2
    after = (await api.client.get(flow_path("a"))).json()  # the cached body moved on
    assert after["flowStopped"] and after["flowStoppedBy"] == ["vhost-quota"]
    assert after["flowStopReasons"][0]["detail"] == (
        "vhost / store overfull (MST-1008) until below underfullSize=600")
    assert after["flowStoppedCount"] == 0 and not after["measuredFlowStopped"]
    assert after["version"] > before.json()["version"]
    assert not (await api.client.get(flow_path("c", "v2"))).json()["flowStopped"]
    api.broker.queue("b", 5, 150)  # 550 < 600
    await api.poll()
    assert not (await api.client.get(flow_path("b"))).json()["flowStopped"]
    listed = (await api.client.get("/vhosts")).json()
    assert [(v["vhost"], v["storeOverfull"], v["storeOverfullCount"]) for v in listed] == [
        ("/", False, 1), ("v2", False, 0)]


async def test_a_long_poll_wakes_when_the_quota_engages(api: InProcessAPI) -> None:
    api.broker.queue("waits", 5, 1000)
    await api.poll()
    version = (await api.client.get(flow_path("waits"))).json()["version"]
    waiting = asyncio.create_task(api.client.get(
        flow_path("waits"), params={"since": version, "wait": 30}))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await api.client.put(ROOT_QUOTA, json={"overfullSize": 999})
    answer = (await asyncio.wait_for(waiting, 5)).json()
    assert answer["flowStopped"] and answer["flowStoppedBy"] == ["vhost-quota"]


async def test_deleting_the_quota_resumes_and_a_failed_write_changes_nothing(
        make_api: Any, tmp_path: Any) -> None:
    api, store = await make_with_disk_full(make_api, tmp_path)
    api.broker.queue("q", 5, 1000)
    await api.poll()
    await api.client.put(ROOT_QUOTA, json={"overfullSize": 999})
    store.full = True
    assert (await api.client.delete(ROOT_QUOTA)).status_code == 503
    assert (await api.client.get(flow_path("q"))).json()["flowStopped"]
    store.full = False
    r = await api.client.delete(ROOT_QUOTA)
    assert r.status_code == 200 and r.json()["quota"] is None and not r.json()["storeOverfull"]
    assert not (await api.client.get(flow_path("q"))).json()["flowStopped"]


async def test_vhost_defaults_with_broker_j_names(api: InProcessAPI) -> None:
    api.broker.queue("sized", 1, 5000)
    await api.poll()
    r = await api.client.put("/vhosts/%2F/defaults",
                             json={"capacity": 4096, "flowResumeCapacity": 2048})
    assert r.status_code == 200 and r.json()["queueDefaults"]["qpid.flow_stop_size"] == 4096
    answer = (await api.client.get(flow_path("sized"))).json()
    assert answer["sources"]["size"] == "vhost" and answer["flowStoppedBy"] == ["queue"]
    assert answer["flowStoppedCount"] == 1
    r = await api.client.put("/vhosts/%2F/defaults", json={"capacity": 10,
                                                           "flowResumeCapacity": 20})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == (
        "qpid.flow_resume_size=20 must be less or equal to qpid.flow_stop_size=10")
    assert (await api.client.delete("/vhosts/%2F/defaults")).status_code == 200
    assert (await api.client.get(flow_path("sized"))).json()["sources"]["size"] == "default"


async def test_broker_alarm_stops_queues_and_exchanges_until_cleared(
        api: InProcessAPI) -> None:
    api.broker.queue("one", 1, 10)
    api.broker.queue("two", 1, 10, vhost="v2")
    await api.poll()
    api.broker.nodes["rabbit@test"] = NodeStatus(memory=True, disk=False)
    await api.poll()
    for path in (flow_path("one"), flow_path("two", "v2")):
        answer = (await api.client.get(path)).json()
        assert answer["flowStopped"] and answer["flowStoppedBy"] == ["broker-alarm"]
        assert answer["flowStopReasons"][0]["detail"].startswith(
            "memory alarm on node rabbit@test")
    exchange = (await api.client.get("/flow/exchange/%2F/nowhere-bound",
                                     params={"routing_key": "k"}))
    assert exchange.status_code == 404  # unknown exchange: nothing to say
    api.broker.topology = type(api.broker.topology).build({("/", "x"): "direct"}, [])
    api.sidecar.runtime.topology.max_age = 0
    routed = (await api.client.get("/flow/exchange/%2F/x", params={"routing_key": "k"})).json()
    assert routed["flowStopped"] and routed["destinations"] == []
    assert routed["flowStoppedBy"] == ["broker-alarm"] and routed["stoppedBy"] == []
    alarms = (await api.client.get("/alarms")).json()
    assert [(a["node"], a["resource"]) for a in alarms["alarms"]] == [("rabbit@test", "memory")]
    api.broker.nodes_failure = "GET /api/nodes: HTTP 500"  # unknown: the alarm holds
    await api.poll()
    assert (await api.client.get(flow_path("one"))).json()["flowStopped"]
    assert (await api.client.get("/alarms")).json()["lastError"] == "GET /api/nodes: HTTP 500"
    api.broker.nodes_failure = None
    api.broker.nodes["rabbit@test"] = NodeStatus(memory=False, disk=False)
    await api.poll()
    assert not (await api.client.get(flow_path("one"))).json()["flowStopped"]
    assert (await api.client.get("/alarms")).json()["alarms"] == []


async def test_metrics_export_vhost_quotas_and_alarms(api: InProcessAPI) -> None:
    api.broker.queue("m", 3, 1000)
    api.broker.nodes["rabbit@test"] = NodeStatus(memory=False, disk=True)
    await api.poll()
    await api.client.put(ROOT_QUOTA, json={"overfullSize": 999, "underfullSize": 500})
    text = (await api.client.get("/metrics")).text
    for line in ('flow_sidecar_vhost_store_overfull{vhost="/"} 1.0',
                 'flow_sidecar_vhost_store_overfull_total{vhost="/"} 1.0',
                 'flow_sidecar_vhost_messages_bytes{vhost="/"} 1000.0',
                 'flow_sidecar_vhost_quota_overfull_size{vhost="/"} 999.0',
                 'flow_sidecar_vhost_quota_underfull_size{vhost="/"} 500.0',
                 'flow_sidecar_broker_alarm{node="rabbit@test",resource="disk"} 1.0',
                 'flow_sidecar_queue_flow_stopped{queue="m",vhost="/"} 1.0'):
        assert line in text, line


async def test_webhook_and_stream_payloads_say_why(api: InProcessAPI) -> None:
    api.broker.queue("hooked", 1, 1000)
    await api.poll()
    hook = api.sidecar.runtime.outbox.create(url="http://127.0.0.1:9/h", secret="s" * 20,
                                             vhost="*", queue="*")
    await api.client.put(ROOT_QUOTA, json={"overfullSize": 10})
    deliveries = (await api.client.get(f"/webhooks/{quote(hook.id)}/deliveries")).json()
    data = deliveries[-1]["event"]["data"]
    assert data["flowStopped"] and data["flowStoppedBy"] == ["vhost-quota"]
    assert "MST-1008" in data["reason"]


async def test_broker_j_store_quota_applies_unless_one_is_stored(make_api: Any) -> None:
    answers = copy.deepcopy(RECORDED["answers"])  # queues of vhost "default": 11,000,600 B
    answers["/api/latest/virtualhost/default"][0].update(
        storeOverfullSize=10_000_000, storeUnderfullSize=5_000_000)
    broker, _ = broker_j_adapter(answers)
    api: InProcessAPI = await make_api(broker=broker)
    await api.poll()
    view = (await api.client.get("/vhosts/default")).json()
    assert view["brokerQuota"]["overfullSize"] == 10_000_000 and view["quota"] is None
    assert view["quotaSource"] == "broker" and view["storeOverfull"] is True
    audit = (await api.client.get("/flow/default/audit")).json()  # empty, but its vhost
    assert audit["flowStopped"] is True and audit["flowStoppedBy"] == ["vhost-quota"]

    r = await api.client.put("/vhosts/default/quota", json={"overfullSize": 20_000_000})
    assert r.status_code == 200, r.text
    view = (await api.client.get("/vhosts/default")).json()
    assert view["quotaSource"] == "api" and view["storeOverfull"] is False
