"""`GET /events` filters: the queues a stream's snapshot shows, looked up by name when the
stream names its queues, are the ones a walk of every queue would find."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.routes.events import QueueFilter
from tests.api.conftest import ScriptedBroker

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("filter_", [
    QueueFilter(None, frozenset({"orders"}), None),
    QueueFilter("b", frozenset({"orders"}), None),
    QueueFilter(None, frozenset({"orders", "gone", "other"}), None),
    QueueFilter("nowhere", frozenset({"orders"}), None),
    QueueFilter(None, frozenset({"orders"}), "oth*"),
    QueueFilter("/", frozenset(), None),
    QueueFilter(None, frozenset(), None),
])
async def test_a_snapshot_by_name_finds_what_a_walk_of_every_queue_finds(
        make_api: Callable[..., Any], filter_: QueueFilter) -> None:
    broker = ScriptedBroker()
    broker.vhosts = {"/", "b"}
    for vhost, name in (("/", "orders"), ("b", "orders"), ("/", "other"), ("b", "zz")):
        broker.queue(name, 1, 10, vhost=vhost)
    api = await make_api(broker=broker)
    await api.poll()
    engine = api.engine
    walked = sorted((e for e in engine.entries() if filter_(e.key)), key=lambda e: e.key)
    assert [e.key for e in filter_.wanted(engine)] == [e.key for e in walked]
    assert filter_.named_only == (filter_.names if filter_.glob is None else frozenset())
