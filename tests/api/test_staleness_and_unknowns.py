"""Answers about what the sidecar does not know: data gone stale (long-pollers must hear
of it) and byte counts the broker does not report (streams: null, never 0)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio


async def test_a_long_poll_returns_when_the_data_goes_stale_and_fresh(make_api: Any) -> None:
    api: InProcessAPI = await make_api(stale_after=0.05)  # --on-stale hold: told stays
    api.broker.queue("ageing", 1)
    await api.poll()
    first = (await api.client.get(flow_path("ageing"))).json()
    assert first["stale"] is False

    started = time.monotonic()
    waiting = asyncio.create_task(api.client.get(
        flow_path("ageing"), params={"since": first["version"], "wait": 30}))
    await asyncio.sleep(0.1)
    api.broker.failure = "connection refused"
    await api.poll()
    answer = (await asyncio.wait_for(waiting, 5)).json()
    assert answer["stale"] is True and answer["version"] != first["version"]
    assert answer["flowStopped"] is False  # hold: the last state, now marked stale
    assert time.monotonic() - started < 5  # not at the end of its 30 s wait

    waiting = asyncio.create_task(api.client.get(
        flow_path("ageing"), params={"since": answer["version"], "wait": 30}))
    await asyncio.sleep(0.05)
    api.broker.failure = None
    await api.poll()
    fresh = (await asyncio.wait_for(waiting, 5)).json()
    assert fresh["stale"] is False and fresh["version"] != answer["version"]


async def test_a_stream_shows_unknown_bytes_and_an_unwatched_size(api: InProcessAPI) -> None:
    api.broker.queue("logs", 7, None, queue_type="stream",
                     arguments={"qpid.flow_stop_size": 4096})
    await api.poll()
    answer = (await api.client.get(flow_path("logs"))).json()
    assert answer["depth"] == {"messages": 7, "bytes": None}
    assert answer["thresholds"]["qpid.flow_stop_size"] is None
    assert answer["sources"]["size"] == "none"
    assert answer["configWarnings"] == [(
        "arguments: qpid.flow_stop_size=4096 not watched: the broker reports no byte count "
        "(message_bytes) for this stream queue")]
    metrics = (await api.client.get("/metrics")).text
    assert 'flow_sidecar_queue_messages{queue="logs",vhost="/"} 7.0' in metrics
    assert 'flow_sidecar_queue_messages_bytes{queue="logs"' not in metrics
    assert 'flow_sidecar_queue_flow_stop_size{queue="logs"' not in metrics
