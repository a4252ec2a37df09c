"""Parked long polls of producers that say their class (`X-Producer-Class`), over real HTTP
on loopback through uvicorn, with the direct path on and off: a class's stop wakes them,
each with its own answer (docs/graded-flow.md#producer-classes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.api.served import UVLOOP, read_answer, request, serving
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return UVLOOP


@pytest.mark.parametrize("direct", ["on", "off"])
async def test_a_class_stop_wakes_its_parked_producers_with_their_own_answer(
        make_api: Callable[..., Any], direct: str) -> None:
    async with serving(make_api, settings={"direct_writes": direct,
                                           "default_queue_limit": 0}) as served:
        api = served.api
        r = await api.client.put(queue_path("orders") + "/flow", json={
            "qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80,
            "producerClasses": {"bulk": 0.5}})
        assert r.status_code == 200, r.text
        version = await served.version("orders")
        polls = {"bulk": ("X-Producer-Class: bulk", "X-Producer-Id: b"),
                 "other": ("X-Producer-Class: critical",), "none": ()}
        connections = {}
        for name, headers in polls.items():
            reader, writer = await served.connect()
            writer.write(request(flow_path("orders") + f"?since={version}&wait=10", *headers))
            connections[name] = reader, writer
        await asyncio.sleep(0.2)  # parked (or waiting in the hub with the direct path off)
        if direct == "on":
            assert served.parked.waiting == 3
        api.broker.queue("orders", 60, 600)  # over bulk's stop (50), under the queue's
        await api.poll()
        answers = {name: json.loads((await read_answer(reader))[1])
                   for name, (reader, _) in connections.items()}
        assert (answers["bulk"]["flowStopped"], answers["bulk"]["flowStoppedBy"]) == (
            True, ["class:bulk"])
        for name in ("other", "none"):  # the queue's own answer, byte for byte
            assert (answers[name]["flowStopped"], answers[name]["flowStoppedBy"]) == (False, [])
        assert answers["other"] == answers["none"]
        assert len({a["version"] for a in answers.values()}) == 1 and \
            answers["bulk"]["version"] > version
        for _, writer in connections.values():
            writer.close()
