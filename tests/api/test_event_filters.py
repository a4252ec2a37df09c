"""`GET /events` filters: the queues a stream's snapshot shows, looked up by name when the
stream names its queues, are the ones a walk of every queue would find."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.name_filter_worker import NameFilterWorker
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


@pytest.mark.parametrize(("name", "refused"), [
    ("o" * 256, "has 256 characters; a glob may have at most 255"),
])
async def test_a_glob_over_the_cap_is_refused_naming_name(
        make_api: Callable[..., Any], name: str, refused: str) -> None:
    api = await make_api()
    answer = await api.client.get("/events", params={"name": name})
    assert answer.status_code == 400 and answer.json()["detail"].startswith("name=")
    assert refused in answer.json()["detail"]


async def test_a_streams_glob_is_matched_once_per_name_off_the_loop(
        make_api: Callable[..., Any]) -> None:
    broker = ScriptedBroker()
    for name in ("orders.eu", "orders.us", "other"):
        broker.queue(name, 1, 10)
    api = await make_api(broker=broker)
    await api.poll()
    matches = QueueFilter(None, frozenset(), "orders.*")
    worker = NameFilterWorker()
    try:
        passing = await worker.passing("glob", "orders.*", ["orders.eu", "orders.us", "other"])
    finally:
        await worker.close()
    assert passing == {"orders.eu", "orders.us"}
    matches.seen.update((n, n in passing) for n in ("orders.eu", "orders.us", "other"))
    assert [e.key[1] for e in matches.wanted(api.engine)] == ["orders.eu", "orders.us"]
    assert matches(("/", "orders.new")) and matches.seen["orders.new"]  # a later name
