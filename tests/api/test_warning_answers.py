"""The warning through the API, in process: start-up options under vhost defaults under a
queue's settings, echoed where they are stored; `/flow` and `/queues` show it at once
(cached answers included) without a new version, so a long poll sleeps on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio
ARGS = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 50}


async def test_settings_resolve_echo_and_warn_without_a_new_version(
        make_api: Any) -> None:
    api: InProcessAPI = await make_api(warning_fraction=0.95)  # --warning-fraction
    api.broker.queue("orders", 80, 800, arguments=ARGS)
    await api.poll()
    first = (await api.client.get(flow_path("orders"))).json()
    assert first["warning"] is False and first["fillRate"] is None
    waiter = asyncio.create_task(api.client.get(flow_path("orders"), params={
        "since": first["version"], "wait": 1}))
    await asyncio.sleep(0.1)  # parked before the warning starts
    started = asyncio.get_running_loop().time()
    r = await api.client.put("/vhosts/%2F/defaults", json={"flow.warning_fraction": 0.8})
    assert r.status_code == 200 and r.json()["queueDefaults"]["flow.warning_fraction"] == 0.8
    warned = (await api.client.get(flow_path("orders"))).json()  # 80 >= 0.8 x 100
    assert warned["warning"] is True and warned["version"] == first["version"]
    assert (await waiter).json()["version"] == first["version"]
    assert asyncio.get_running_loop().time() - started > 0.8  # not woken: slept on

    r = await api.client.put("/queues/%2F/orders/flow", json={**ARGS,
                                                             "flow.warning_fraction": 0.9})
    assert r.status_code == 200 and r.json()["warning"] is False  # the queue's own wins
    assert r.json()["settings"]["flow.warning_fraction"] == 0.9
    listed = (await api.client.get("/queues")).json()
    assert [q["warning"] for q in listed if q["queue"] == "orders"] == [False]
