"""Long polls of `GET /flow/...`, which park in the `/flow` fast path (api.edge.fast_path)
and fall back to the route for everything it does not take: the same answers either way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.edge.protocol import long_poll_query
from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("query", "parsed"), [
    (b"wait=5", (None, 5.0)),
    (b"since=17&wait=0.5", (17, 0.5)),
    (b"wait=300&since=0", (0, 300.0)),
    (b"wait=0", None),            # the route's 422: wait must be above 0
    (b"wait=301", None),          # ... and at most 300
    (b"since=17", None),          # no wait: the route answers at once
    (b"since=-1&wait=5", None),
    (b"since=x&wait=5", None),
    (b"wait=1e3", None),
    (b"wait=5&wait=6", None),
    (b"wait=5&producer=p", None),  # anything else: the route judges it
    (b"since=" + b"9" * 19 + b"&wait=5", None),
])
def test_what_the_fast_path_takes(query: bytes, parsed: tuple[int | None, float] | None
                                  ) -> None:
    assert long_poll_query(query) == parsed


async def flow_now(api: InProcessAPI, queue: str) -> dict[str, Any]:
    answer = await api.client.get(flow_path(queue))
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


async def test_a_change_wakes_every_waiter_with_the_current_answer(api: InProcessAPI) -> None:
    api.broker.queue("orders", 3, 30)
    await api.poll()
    before = await flow_now(api, "orders")
    waiters = [asyncio.create_task(api.client.get(
        flow_path("orders") + f"?since={before['version']}&wait=5",
        headers={"X-Producer-Id": f"p{i}", "X-Producer-Capacity": "10"}))
        for i in range(20)]
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiters)
    put = await api.client.put(queue_path("orders") + "/flow",
                               json={"qpid.flow_stop_count": 1})
    assert put.status_code == 200
    answers = await asyncio.wait_for(asyncio.gather(*waiters), 2)
    now = await flow_now(api, "orders")
    assert now["flowStopped"] and now["version"] != before["version"]
    assert all(a.status_code == 200 and a.json()["flowStopped"] for a in answers)
    # the producers that waited are noted on the queue, as the route notes them
    listed = (await api.client.get(queue_path("orders"))).json()["activeProducers"]
    assert {p["id"] for p in listed} == {f"p{i}" for i in range(20)}


async def test_an_old_version_answers_at_once_and_a_wait_ends(api: InProcessAPI) -> None:
    api.broker.queue("orders", 3, 30)
    await api.poll()
    now = await flow_now(api, "orders")
    stale = await asyncio.wait_for(api.client.get(
        flow_path("orders") + f"?since={now['version'] + 1}&wait=5"), 1)
    assert stale.json() == now
    quiet = await asyncio.wait_for(api.client.get(
        flow_path("orders") + f"?since={now['version']}&wait=0.05"), 1)
    assert quiet.json() == now


async def test_a_queue_gone_while_waiting_is_a_404(api: InProcessAPI) -> None:
    api.broker.queue("orders", 3, 30)
    await api.poll()
    now = await flow_now(api, "orders")
    waiter = asyncio.create_task(api.client.get(
        flow_path("orders") + f"?since={now['version']}&wait=5"))
    await asyncio.sleep(0.05)
    del api.broker.queues[("/", "orders")]
    await api.poll()
    await api.poll()  # missing from two polls: gone
    answer = await asyncio.wait_for(waiter, 2)
    assert answer.status_code == 404 and "orders" in answer.json()["detail"]


@pytest.mark.parametrize(("query", "field"), [("wait=0", "wait"), ("wait=301", "wait"),
                                              ("since=x&wait=1", "since")])
async def test_what_the_fast_path_leaves_is_refused_by_the_route(
        api: InProcessAPI, query: str, field: str) -> None:
    api.broker.queue("orders", 3, 30)
    await api.poll()
    answer = await api.client.get(flow_path("orders") + "?" + query)
    assert answer.status_code == 422
    assert [e["loc"] for e in answer.json()["detail"]] == [["query", field]]
