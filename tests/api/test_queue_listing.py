"""`GET /queues` and `GET /queues/history` for a person looking at many queues: filtered,
sorted and paged in the sidecar with RabbitMQ's parameters, gzipped when asked, and the
old unpaged list kept for the clients that read it."""

from __future__ import annotations

import gzip
from typing import Any

import httpx
import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import queue_path

pytestmark = pytest.mark.anyio
STOP = {"qpid.flow_stop_count": 5}


@pytest.fixture
async def many(api: InProcessAPI) -> InProcessAPI:
    """25 queues `q00`..`q24` (depth = their number, stopped above 5) and one in vhost v2."""
    for i in range(25):
        api.broker.queue(f"q{i:02d}", i, 10 * i, arguments=STOP)
    api.broker.queue("other", 1, 1, vhost="v2")
    await api.poll()
    return api


async def get(api: InProcessAPI, path: str, **params: Any) -> httpx.Response:
    return await api.client.get(path, params=params)


async def test_a_page_is_rabbitmqs_paged_object(many: InProcessAPI) -> None:
    answer = (await get(many, "/queues", page=2, page_size=10, vhost="/")).json()
    assert [q["queue"] for q in answer.pop("items")] == [f"q{i:02d}" for i in range(10, 20)]
    assert answer == {"page": 2, "page_size": 10, "page_count": 3, "item_count": 10,
                      "filtered_count": 25, "total_count": 26}
    last = (await get(many, "/queues", page=3, page_size=10, vhost="/")).json()
    assert last["item_count"] == 5 and len(last["items"]) == 5
    nothing = (await get(many, "/queues", page=1, name="nosuchqueue")).json()
    assert (nothing["items"], nothing["page_count"], nothing["filtered_count"]) == ([], 0, 0)


async def test_items_are_the_same_views_as_the_list(many: InProcessAPI) -> None:
    await many.client.put(queue_path("later") + "/flow", json={"flow_stop_count": 4})
    listed = (await get(many, "/queues")).json()
    paged = (await get(many, "/queues", page=1, page_size=500)).json()
    assert paged["items"] == listed and len(listed) == 27  # settings waiting are listed
    one = (await many.client.get(queue_path("q03"))).json()
    one.pop("activeProducers")
    assert one.pop("topProducers") is None  # the single queue's answer only; never stopped
    item = next(q for q in listed if q["queue"] == "q03")
    item.pop("brokerFlowStoppedCount")  # not in QueueView, so the validated answer drops it
    assert one == item


async def test_stopped_first_then_by_name(many: InProcessAPI) -> None:
    page = (await get(many, "/queues", page=1, page_size=3, sort="stopped")).json()
    assert [(q["queue"], q["flowStopped"]) for q in page["items"]] == [
        ("q06", True), ("q07", True), ("q08", True)]
    deepest = (await get(many, "/queues", page=1, page_size=2, sort="messages")).json()
    assert [q["queue"] for q in deepest["items"]] == ["q24", "q23"]
    reverse = (await get(many, "/queues", sort="name", sort_reverse="true")).json()
    assert reverse[0]["vhost"] == "v2"


async def test_name_filters_as_rabbitmq_or_as_a_glob(many: InProcessAPI) -> None:
    names = [q["queue"] for q in (await get(many, "/queues", name="Q1")).json()]
    assert names == [f"q{i}" for i in range(10, 20)]
    names = [q["queue"] for q in (await get(many, "/queues", name="^q2[34]$",
                                            use_regex="true")).json()]
    assert names == ["q23", "q24"]
    names = [q["queue"] for q in (await get(many, "/queues", name="q0?")).json()]
    assert len(names) == 10  # q00..q09: a glob on the whole name, as before


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"page": 0}, 422, "page"),
    ({"page": "x"}, 422, "page"),
    ({"page": 1, "page_size": 501}, 422, "page_size"),
    ({"page": 1, "page_size": 0}, 422, "page_size"),
    ({"sort": "size"}, 422, "sort"),
    ({"use_regex": "maybe"}, 422, "use_regex"),
    ({"name": "(", "use_regex": "true"}, 400, "name"),
    ({"page": 4, "page_size": 10}, 400, "page"),
])
@pytest.mark.parametrize("path", ["/queues", "/queues/history"])
async def test_bad_selections_are_refused_naming_the_parameter(
        many: InProcessAPI, path: str, params: dict[str, Any], status: int,
        field: str) -> None:
    answer = await get(many, path, **params)
    assert answer.status_code == status, answer.text
    detail = answer.json()["detail"]
    if status == 422:
        assert [e["loc"] for e in detail] == [["query", field]]
    else:
        assert detail.startswith(f"{field}=")


async def test_history_follows_the_same_page(many: InProcessAPI) -> None:
    await many.poll()
    history = (await get(many, "/queues/history", page=1, page_size=2,
                         sort="stopped")).json()
    assert history["size"] == 120
    assert [(q["queue"], len(q["samples"])) for q in history["queues"]] == [
        ("q06", 2), ("q07", 2)]
    newest = history["queues"][0]["samples"][-1][0]
    later = (await get(many, "/queues/history", name="q06", since=newest)).json()
    assert later["queues"] == [{"vhost": "/", "queue": "q06", "samples": []}]


@pytest.mark.parametrize("path", ["/queues", "/queues/history", "/metrics"])
async def test_large_answers_are_gzipped_when_asked(many: InProcessAPI, path: str) -> None:
    plain = await many.client.get(path, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"
    request = many.client.build_request("GET", path, headers={"accept-encoding": "gzip"})
    zipped = await many.client.send(request, stream=True)
    raw = b"".join([chunk async for chunk in zipped.aiter_raw()])
    assert zipped.headers["content-encoding"] == "gzip"
    assert len(raw) < len(plain.content) / 3
    assert steady(gzip.decompress(raw)) == steady(plain.content)


def steady(body: bytes) -> list[bytes]:
    """The lines of an answer that do not move with the clock (`/metrics`' ages)."""
    return [line for line in body.splitlines() if b"age_seconds" not in line]


async def test_gzip_refused_with_a_zero_weight(many: InProcessAPI) -> None:
    answer = await many.client.get("/queues", headers={"accept-encoding": "gzip;q=0"})
    assert "content-encoding" not in answer.headers
