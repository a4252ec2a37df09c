"""Producers on the API: their byte windows in the capacity-window check, and leaving."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio

BYTE_LIMITED = {"x-max-length-bytes": 10_000, "x-overflow": "reject-publish",
                "qpid.flow_stop_size": 8000}


def hello(producer: str, capacity: int, capacity_bytes: int | None = None) -> dict[str, str]:
    headers = {"X-Producer-Id": producer, "X-Producer-Capacity": str(capacity)}
    if capacity_bytes is not None:
        headers["X-Producer-Capacity-Bytes"] = str(capacity_bytes)
    return headers


async def test_overflow_risk_in_bytes_from_declared_byte_windows(api: InProcessAPI) -> None:
    api.broker.queue("sized", 0, 0, arguments=BYTE_LIMITED)
    await api.poll()
    r = await api.client.get(flow_path("sized"), headers=hello("p1", 50, 1500))
    answer = r.json()
    assert answer["producers"]["capacityBytes"] == 1500
    assert (answer["overflowRisk"], answer["overflowRiskUnjudged"]) == (False, None)
    answer = (await api.client.get(flow_path("sized"), headers=hello("p2", 10, 1000))).json()
    assert answer["overflowRisk"] is True
    assert answer["overflowRiskDetail"] == (
        "stop 8000 bytes + active producers' capacity 2500 bytes = 10500 bytes > "
        "max-length-bytes 10000")
    view = (await api.client.get(queue_path("sized"))).json()
    assert [p["capacityBytes"] for p in view["activeProducers"]] == [1500, 1000]


async def test_a_producer_without_a_byte_window_makes_the_size_unjudged(
        api: InProcessAPI) -> None:
    api.broker.queue("unsure", 0, 0, arguments=BYTE_LIMITED)
    await api.poll()
    answer = (await api.client.get(flow_path("unsure"), params={"wait": "0.001"},
                                   headers=hello("p1", 50))).json()
    assert answer["overflowRisk"] is False
    assert "1 active producer(s) declared no X-Producer-Capacity-Bytes" in (
        answer["overflowRiskUnjudged"])


@pytest.mark.parametrize("value", ["abc", "-1", "1" * 19, "1.5", ""])
async def test_bad_byte_capacity_headers_are_422_on_both_paths(
        api: InProcessAPI, value: str) -> None:
    api.broker.queue("hdr-bytes")
    await api.poll()
    for params in (None, {"wait": "0.01"}):
        r = await api.client.get(flow_path("hdr-bytes"), params=params,
                                 headers={**hello("p", 1), "X-Producer-Capacity-Bytes": value})
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"][0]["loc"] == ["header", "x-producer-capacity-bytes"]


async def test_a_producer_that_left_is_forgotten_and_its_parked_poll_ignored(
        api: InProcessAPI, caplog: pytest.LogCaptureFixture) -> None:
    api.broker.queue("left", 5, arguments={"qpid.flow_stop_count": 3})
    api.broker.queue("also", 0)
    await api.poll()
    first = (await api.client.get(flow_path("left"), headers=hello("gone", 40))).json()
    await api.client.get(flow_path("also"), headers=hello("gone", 40))
    assert first["flowStopped"] is True and first["producers"]["capacity"] == 40
    parked = asyncio.create_task(api.client.get(
        flow_path("left"), params={"since": first["version"], "wait": 30},
        headers=hello("gone", 40)))
    await asyncio.sleep(0.05)
    r = await api.client.delete("/producers/gone")
    assert r.status_code == 200
    assert r.json() == {"producer": "gone", "queues": [{"vhost": "/", "queue": "also"},
                                                       {"vhost": "/", "queue": "left"}]}
    assert (await api.client.get(flow_path("left"))).json()["producers"]["capacity"] == 0
    with caplog.at_level(logging.INFO, logger="flow_sidecar.producers"):
        api.broker.queue("left", 0, arguments={"qpid.flow_stop_count": 3})
        await api.poll()  # flow resumes: the parked poll answers "go" now
        assert (await asyncio.wait_for(parked, 5)).json()["flowStopped"] is False
    assert not [r for r in caplog.records if "CHN-1006" in r.getMessage()]
    view = (await api.client.get(queue_path("left"))).json()
    assert view["activeProducers"] == [] and view["producers"]["capacity"] == 0
    again = await api.client.delete("/producers/gone")
    assert again.status_code == 200 and again.json()["queues"] == []
