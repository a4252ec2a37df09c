"""Who may speak for a producer: a grant is released only by its producer, and with
--producer-token / --max-producers-per-client registering, asking, releasing and leaving
need the token and stay within a cap per client address."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import InProcessAPI, MakeAPI
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio
GRANT = "/grants/%2F/orders"
STOP = {"qpid.flow_stop_count": 100}


async def sidecar(make_api: MakeAPI, **options: Any) -> InProcessAPI:
    api: InProcessAPI = await make_api(default_queue_limit=0, **options)
    api.broker.queue("orders", 10, 1_000, arguments=STOP)
    await api.poll()
    return api


def as_producer(name: str, token: str | None = None) -> dict[str, str]:
    return {"X-Producer-Id": name} | ({"Authorization": f"Bearer {token}"} if token else {})


async def test_a_grant_is_released_only_by_its_producer(make_api: MakeAPI) -> None:
    api = await sidecar(make_api)
    held = (await api.client.post(GRANT, json={"messages": 50},
                                  headers=as_producer("owner"))).json()
    for thief in (as_producer("thief"), {}):
        r = await api.client.post("/grants/release", headers=thief, json={"grants": [
            {"grantId": held["grantId"], "usedMessages": 0}]})
        assert r.status_code == 403, r.text
        assert "granted to another producer" in r.json()["detail"]
    r = await api.client.post("/grants/release", headers=as_producer("owner"), json={
        "grants": [{"grantId": held["grantId"], "usedMessages": 30}]})
    assert r.json() == {"released": 1, "notHeld": []}  # the owner's use is counted


async def test_the_producer_token_guards_every_producer_write(make_api: MakeAPI) -> None:
    api = await sidecar(make_api, producer_token="p-secret", token="admin")
    assert (await api.client.get(flow_path("orders"))).status_code == 200  # reads stay open
    refused = [
        await api.client.get(flow_path("orders"), headers=as_producer("x")),
        await api.client.get(flow_path("orders"), headers=as_producer("x", "wrong")),
        await api.client.post(GRANT, json={"messages": 1}, headers=as_producer("x")),
        await api.client.post("/grants/release", json={"grants": [
            {"grantId": "g", "usedMessages": 0}]}, headers=as_producer("x")),
        await api.client.delete("/producers/x"),
    ]
    assert [r.status_code for r in refused] == [401] * 5
    assert "--producer-token" in refused[0].json()["detail"]
    unnamed = (await api.client.get(flow_path("orders"))).json()
    assert unnamed["producers"]["capacity"] == 0  # nobody got registered
    view = (await api.client.get(flow_path("orders"), headers={
        **as_producer("x", "p-secret"), "X-Producer-Capacity": "5"})).json()
    assert view["producers"]["capacity"] == 5  # registered
    assert (await api.client.post(GRANT, json={"messages": 1},
                                  headers=as_producer("x", "admin"))).status_code == 200
    assert (await api.client.delete(
        "/producers/x", headers={"Authorization": "Bearer p-secret"})).status_code == 200


async def test_one_client_speaks_for_at_most_the_cap(make_api: MakeAPI) -> None:
    api = await sidecar(make_api, max_producers_per_client=3)
    for name in ("a", "b", "c"):
        assert (await api.client.get(flow_path("orders"),
                                     headers=as_producer(name))).status_code == 200
    r = await api.client.post(GRANT, json={"messages": 500}, headers=as_producer("d"))
    assert r.status_code == 429 and "--max-producers-per-client is 3" in r.json()["detail"]
    assert (await api.client.get(flow_path("orders"),
                                 headers=as_producer("e"))).status_code == 429
    honest = await api.client.post(GRANT, json={"messages": 500}, headers=as_producer("a"))
    assert honest.status_code == 200 and honest.json()["messages"] > 0
