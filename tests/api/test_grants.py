"""Credit grants through the API, in process over a scripted broker with a clock the test
moves: bad requests change nothing, leases expire, waiting requests wake up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sidecar.flow.depth_bound import DepthBound
from sidecar.signals.exchange_routing import Binding, Topology
from tests.api.conftest import InProcessAPI, MakeAPI
from tests.utils.clock import Clock

pytestmark = pytest.mark.anyio
GRANT = "/grants/%2F/orders"
LAG = 2.0


@pytest.fixture
async def clocked(make_api: MakeAPI) -> tuple[InProcessAPI, Clock]:
    """A sidecar whose poller and grant desk read the test's clock, with queue `orders`
    (stop 100 messages, 10 on it; no default byte limit) polled once."""
    api: InProcessAPI = await make_api(broker_stats_lag=LAG, grant_lease=3.0,
                                       default_queue_limit=0)
    clock = Clock(1_000_000.0)
    api.sidecar.runtime.poller.clock = clock
    api.sidecar.runtime.grants.clock = clock
    api.broker.queue("orders", 10, 1_000, arguments={"qpid.flow_stop_count": 100})
    await api.poll()
    return api, clock


async def ask(api: InProcessAPI, body: dict[str, Any], producer: str | None = None,
              path: str = GRANT) -> dict[str, Any]:
    headers = {"X-Producer-Id": producer} if producer else {}
    r = await api.client.post(path, json=body, headers=headers)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def ledger(api: InProcessAPI) -> dict[str, Any]:
    r = await api.client.get(GRANT)
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()
    return view


async def test_grant_release_and_the_ledger_view(clocked: tuple[InProcessAPI, Clock]) -> None:
    api, clock = clocked
    first = await ask(api, {"messages": 60, "bytes": 6_000}, "a")
    assert (first["messages"], first["bytes"], first["leaseSeconds"]) == (60, 6_000, 3.0)
    assert first["grantId"] and first["destinations"] == ["orders"]
    second = await ask(api, {"messages": 60}, "b")
    assert second["messages"] == 30 and "30 of 100 messages free" in second["limitedBy"]
    assert second["bytes"] is None                      # no size threshold: no byte limit
    view = await ledger(api)
    assert view["held"] == {"grants": 2, "messages": 90, "bytes": 6_000}
    assert view["free"] == {"messages": 0, "bytes": None}
    assert view["producers"] == ["a", "b"]

    r = await api.client.post("/grants/release", json={"grants": [
        {"grantId": first["grantId"], "usedMessages": 20, "usedBytes": 2_000}]}, headers={"X-Producer-Id": "a"})
    assert r.json() == {"released": 1, "notHeld": []}
    view = await ledger(api)                            # 40 back now, 20 in flight
    assert view["outstanding"]["messages"] == 30 + 20 and view["free"]["messages"] == 40
    clock.now += LAG                                    # a sample that shows those 20
    api.broker.queue("orders", 30, 3_000, arguments={"qpid.flow_stop_count": 100})
    await api.poll()
    view = await ledger(api)
    assert view["outstanding"]["messages"] == 30 and view["free"]["messages"] == 40
    again = await api.client.post("/grants/release", json={"grants": [
        {"grantId": first["grantId"], "usedMessages": 0}]}, headers={"X-Producer-Id": "a"})
    assert again.json() == {"released": 0, "notHeld": [first["grantId"]]}


async def test_a_dead_holder_blocks_nobody_beyond_its_lease(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    """The holder never releases: its credit is taken as spent when the lease ends and
    comes back with the first sample that describes a moment after that."""
    api, clock = clocked
    dead = await ask(api, {"messages": 1_000, "lease": 2}, "dies")
    assert dead["messages"] == 90 and dead["leaseSeconds"] == 2.0
    assert (await ask(api, {"messages": 10}, "lives"))["messages"] == 0
    clock.now += 2.0                                    # lease over: may have sent all 90
    await api.poll()
    late = await ask(api, {"messages": 10}, "lives")
    assert late["messages"] == 0 and "90 granted or in flight" in late["limitedBy"]
    clock.now += LAG                                    # depth now shows whatever it sent
    await api.poll()
    assert (await ask(api, {"messages": 10}, "lives"))["messages"] == 10
    assert (await ledger(api))["producers"] == ["lives"]  # nor in fair shares


async def test_nothing_while_stopped_and_credit_once_resumed(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    api, clock = clocked
    api.broker.queue("orders", 101, 0, arguments={"qpid.flow_stop_count": 100,
                                                  "qpid.flow_resume_count": 50})
    clock.now += 1
    await api.poll()
    stopped = await ask(api, {"messages": 5})
    assert stopped["grantId"] is None and stopped["limitedBy"] == "queue 'orders' is flow stopped"
    api.broker.queue("orders", 60, 0, arguments={"qpid.flow_stop_count": 100,
                                                 "qpid.flow_resume_count": 50})
    clock.now += 1
    await api.poll()                                    # 60 > resume 50: still stopped
    assert (await ask(api, {"messages": 5}))["messages"] == 0
    api.broker.queue("orders", 49, 0, arguments={"qpid.flow_stop_count": 100,
                                                 "qpid.flow_resume_count": 50})
    clock.now += 1
    await api.poll()
    assert (await ask(api, {"messages": 500}))["messages"] == 51


async def test_a_waiting_request_gets_credit_when_it_is_released(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    api, _ = clocked
    holder = await ask(api, {"messages": 90}, "a")
    waiting = asyncio.create_task(ask(api, {"messages": 30, "wait": 10}, "b"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await api.client.post("/grants/release", json={"grants": [
        {"grantId": holder["grantId"], "usedMessages": 0}]}, headers={"X-Producer-Id": "a"})
    got = await asyncio.wait_for(waiting, 2)
    assert got["messages"] == 30


async def test_releases_in_an_ask_come_first(clocked: tuple[InProcessAPI, Clock]) -> None:
    api, _ = clocked
    held = await ask(api, {"messages": 90}, "a")
    renewed = await ask(api, {"messages": 90, "release": [
        {"grantId": held["grantId"], "usedMessages": 0}]}, "a")
    assert renewed["messages"] == 90 and renewed["notHeld"] == []


async def test_exchange_grants_cover_every_routed_queue(make_api: MakeAPI) -> None:
    api: InProcessAPI = await make_api()
    api.broker.queue("a", 0, 0, arguments={"qpid.flow_stop_count": 100})
    api.broker.queue("b", 80, 0, arguments={"qpid.flow_stop_count": 100})
    api.broker.topology = Topology.build({("/", "fan"): "fanout"}, [
        Binding("/", "fan", "a", "queue", ""), Binding("/", "fan", "b", "queue", "")])
    await api.poll()
    got = await ask(api, {"messages": 50, "bytes": 5_000},
                    path="/grants/exchange/%2F/fan?routing_key=k")
    assert (got["messages"], got["destinations"]) == (20, ["a", "b"])
    missing = await api.client.post("/grants/exchange/%2F/nope", json={"messages": 1})
    assert missing.status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"messages": -1}, "messages"),
    ({"messages": 0}, "messages"),
    ({"messages": 1.5}, "messages"),
    ({"messages": "10"}, "messages"),
    ({"messages": True}, "messages"),
    ({"messages": 10**40}, "messages"),
    ({"messages": 10, "bytes": -5}, "bytes"),
    ({"messages": 10, "bytes": 2**60}, "bytes"),
    ({"messages": 10, "lease": 0}, "lease"),
    ({"messages": 10, "lease": 1e-300}, "lease"),  # would be granted already expired
    ({"messages": 10, "lease": 0.05}, "lease"),
    ({"messages": 10, "wait": 31}, "wait"),
    ({"messages": 10, "mesages": 5}, "mesages"),
    ({}, "messages"),
    ({"messages": 10, "release": [{"grantId": "x", "usedMessages": -1}]}, "usedMessages"),
    ({"messages": 10, "release": [{"grantId": "x", "extra": 1}]}, "extra"),
    ({"messages": 10, "release": [{"grantId": "HELD", "usedMessages": 91}]}, "usedMessages"),
    ({"messages": 10, "release": [{"grantId": "HELD", "confirmed": "yes"}]}, "confirmed"),
    ({"messages": 10, "release": [{"grantId": "HELD", "confirmed": 1}]}, "confirmed"),
])
async def test_bad_asks_are_422_naming_the_field_and_change_nothing(
        clocked: tuple[InProcessAPI, Clock], body: dict[str, Any], field: str) -> None:
    api, _ = clocked
    held = await ask(api, {"messages": 90}, "a")
    for item in body.get("release", []):
        if item["grantId"] == "HELD":
            item["grantId"] = held["grantId"]
    before = api.sidecar.runtime.grants.ledger
    r = await api.client.post(GRANT, json=body)
    assert r.status_code == 422, r.text
    assert any(d["loc"][-1] == field for d in r.json()["detail"]), r.json()
    assert api.sidecar.runtime.grants.ledger == before


@pytest.mark.parametrize("content", ['{"messages": NaN}', '{"messages": 10', "[]",
                                     '{"grants": [{"grantId": "g", "usedMessages": 2}]}'])
async def test_malformed_bodies_are_422(clocked: tuple[InProcessAPI, Clock],
                                        content: str) -> None:
    api, _ = clocked
    r = await api.client.post(GRANT, content=content,
                              headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text


async def test_release_claiming_too_much_releases_nothing(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    api, _ = clocked
    a = await ask(api, {"messages": 40, "bytes": 100}, "a")
    b = await ask(api, {"messages": 10}, "a")
    r = await api.client.post("/grants/release", json={"grants": [
        {"grantId": a["grantId"], "usedMessages": 1},
        {"grantId": b["grantId"], "usedMessages": 1, "usedBytes": 10},
        {"grantId": a["grantId"], "usedBytes": 101}]}, headers={"X-Producer-Id": "a"})
    assert r.status_code == 422
    assert [d["loc"] for d in r.json()["detail"]] == [["body", "grants", 2, "usedBytes"]]
    assert (await ledger(api))["held"]["grants"] == 2
    assert (await api.client.post("/grants/release", json={"grants": []})).status_code == 422


async def test_a_size_stop_appearing_while_an_ask_waits_refuses_it_without_a_500(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    """An ask without bytes waits (no credit); a poll then brings a size stop, so the ask
    must now say its bytes: it is answered with nothing granted and why, not a 500."""
    api, clock = clocked
    await ask(api, {"messages": 90}, "a")
    waiting = asyncio.create_task(api.client.post(GRANT, json={"messages": 5, "wait": 5},
                                                  headers={"X-Producer-Id": "b"}))
    await asyncio.sleep(0.05)
    api.broker.queue("orders", 10, 1_000, arguments={"qpid.flow_stop_count": 100,
                                                     "qpid.flow_stop_size": 100_000})
    clock.now += 1
    await api.poll()
    r = await asyncio.wait_for(waiting, 2)
    assert r.status_code == 200, r.text
    assert r.json()["grantId"] is None and "say how many bytes" in r.json()["limitedBy"]


async def test_a_confirmed_release_frees_credit_at_the_first_bound_after_it(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    """Released confirmed, spent credit leaves at an upper bound of the queue's messages
    taken after the release; released unconfirmed, it waits for the samples' lag."""
    api, clock = clocked
    a = await ask(api, {"messages": 90}, "a")
    for confirmed, freed in ((False, 0), (True, 60)):
        r = await api.client.post("/grants/release", json={"grants": [
            {"grantId": a["grantId"], "usedMessages": 90, "confirmed": confirmed}]},
            headers={"X-Producer-Id": "a"})
        assert r.json()["released"] == 1
        entry = api.sidecar.runtime.engine.entry(("/", "orders"))
        assert entry is not None
        entry.bound = DepthBound(100, at=clock.now - 0.001)          # before the release
        assert (await ledger(api))["free"]["messages"] == 0
        entry.bound = DepthBound(100, at=clock.now + 0.001)          # 10 + 90 after it
        assert (await ledger(api))["free"]["messages"] == 0
        entry.bound = DepthBound(40, at=clock.now + 0.001)           # consumers took 60
        assert (await ledger(api))["free"]["messages"] == freed
        if not confirmed:
            clock.now += LAG + 1
            api.broker.queue("orders", 10, 1_000, arguments={"qpid.flow_stop_count": 100})
            await api.poll()
            entry.bound = None
            a = await ask(api, {"messages": 90}, "a")


async def test_only_the_holder_may_release_a_grant(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    """A release frees credit: another producer (or an anonymous client) ending a's grant
    is refused with 403, and nothing of its request is applied."""
    api, _ = clocked
    a = await ask(api, {"messages": 40}, "a")
    mine = await ask(api, {"messages": 10}, "b")
    theft = {"grants": [{"grantId": mine["grantId"], "usedMessages": 0},
                        {"grantId": a["grantId"], "usedMessages": 0}]}
    for headers in ({"X-Producer-Id": "b"}, {}):
        r = await api.client.post("/grants/release", json=theft, headers=headers)
        assert r.status_code == 403, r.text
        assert "granted to another producer" in r.json()["detail"]
        asked = await api.client.post(GRANT, json={"messages": 5, "release": theft["grants"]},
                                      headers=headers)
        assert asked.status_code == 403
    assert (await ledger(api))["held"] == {"grants": 2, "messages": 50, "bytes": 0}
    r = await api.client.post("/grants/release", json={"grants": theft["grants"][1:]},
                              headers={"X-Producer-Id": "a"})
    assert r.json() == {"released": 1, "notHeld": []}


async def test_bytes_are_required_where_size_is_watched(make_api: MakeAPI) -> None:
    """Under the default queue limit every queue has a size stop: an ask must say how many
    bytes, and one that does not is refused before its releases are applied."""
    api: InProcessAPI = await make_api()
    api.broker.queue("orders", 0, 0)
    await api.poll()
    held = await ask(api, {"messages": 10, "bytes": 1_000})
    before = api.sidecar.runtime.grants.ledger
    r = await api.client.post(GRANT, json={"messages": 10, "release": [
        {"grantId": held["grantId"], "usedMessages": 0}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "bytes"]
    assert "qpid.flow_stop_size=83886080" in r.json()["detail"][0]["msg"]
    assert api.sidecar.runtime.grants.ledger == before


async def test_unknown_queue_is_404_and_before_the_first_poll_503(make_api: MakeAPI) -> None:
    fresh: InProcessAPI = await make_api()
    assert (await fresh.client.post(GRANT, json={"messages": 1})).status_code == 503
    await fresh.poll()
    r = await fresh.client.post(GRANT, json={"messages": 1})
    assert r.status_code == 404 and "not known to the broker" in r.json()["detail"]


async def test_the_flow_answer_is_unchanged_by_grants(clocked: tuple[InProcessAPI, Clock]
                                                      ) -> None:
    api, _ = clocked
    before = (await api.client.get("/flow/%2F/orders")).content
    await ask(api, {"messages": 50}, "a")
    assert (await api.client.get("/flow/%2F/orders")).content == before


async def test_metrics_count_requests_and_the_credit_each_queue_carries(
        clocked: tuple[InProcessAPI, Clock]) -> None:
    api, clock = clocked

    async def metrics() -> dict[str, float]:
        text = (await api.client.get("/metrics")).text
        return {name: float(value) for name, value in
                (line.rsplit(" ", 1) for line in text.splitlines()
                 if not line.startswith("#") and "grant" in line)}

    before = await metrics()
    assert before["flow_sidecar_grant_requests_total"] == 0
    assert before["flow_sidecar_grants_held"] == 0
    assert not any("outstanding" in name for name in before)   # no credit: no series
    first = await ask(api, {"messages": 60}, "a")
    await ask(api, {"messages": 60}, "b")                       # 30 left: 30 granted
    clock.now += 1
    api.broker.queue("orders", 100, 1_000, arguments={"qpid.flow_stop_count": 100})
    await api.poll()                                            # stopped: nothing granted
    assert (await ask(api, {"messages": 5}, "c"))["grantId"] is None
    during = await metrics()
    assert during["flow_sidecar_grant_requests_total"] == 3
    assert during["flow_sidecar_grant_refusals_total"] == 1
    assert during["flow_sidecar_grant_messages_total"] == 90
    assert during["flow_sidecar_grants_held"] == 2
    assert during['flow_sidecar_queue_grant_outstanding_messages{queue="orders",vhost="/"}'] \
        == 90
    await api.client.post("/grants/release", json={"grants": [
        {"grantId": first["grantId"], "usedMessages": 0}]}, headers={"X-Producer-Id": "a"})
    clock.now += 3.0                                            # b's lease is over: taken
    expired = await metrics()                                   # as sent, in flight
    assert expired["flow_sidecar_grants_held"] == 0
    assert expired['flow_sidecar_queue_grant_outstanding_messages{queue="orders",vhost="/"}'] \
        == 30
    clock.now += LAG + 1
    await api.poll()                                            # a sample that shows them
    assert not any("outstanding" in name for name in await metrics())
