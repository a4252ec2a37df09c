"""Pacing on the API: producers' reports (`X-Producer-Published`) recorded from `/flow`
(fast path and route) and grant asks, in memory."""

from __future__ import annotations

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio


def reporting(producer: str, published: int) -> dict[str, str]:
    return {"X-Producer-Id": producer, "X-Producer-Published": str(published)}


async def test_reports_are_recorded_from_flow_and_grant_asks(api: InProcessAPI) -> None:
    api.broker.queue("reported", 0, 0, arguments={"qpid.flow_stop_count": 100})
    await api.poll()
    reports = api.sidecar.runtime.reports
    key = ("/", "reported")
    for published, params in ((10, None), (20, {"wait": "0.01"})):  # fast path, then route
        r = await api.client.get(flow_path("reported"), params=params,
                                 headers=reporting("p1", published))
        assert r.status_code == 200, r.text
    assert [e.messages for e in reports.events(key, 0, 1e12)] == [10]
    r = await api.client.post("/grants/%2F/reported", json={"messages": 1, "bytes": 10},
                              headers=reporting("p2", 5))
    assert r.status_code == 200, r.text
    assert sorted(reports.producers(key)) == ["p1", "p2"]
    anonymous = await api.client.get(flow_path("reported"), headers={"X-Producer-Published": "9"})
    assert anonymous.status_code == 200 and sorted(reports.producers(key)) == ["p1", "p2"]
