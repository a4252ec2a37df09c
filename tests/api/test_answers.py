"""What the routes answer, in process: the shapes producers read, the cached `/flow` bodies
and what invalidates them, and writes that commit whole or not at all."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import pytest

from api.store import Store
from sidecar.flow.persistence import StoredState
from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


async def test_flow_answer_shape(api: InProcessAPI) -> None:
    api.broker.queue("shape", 120, 4096, arguments={"qpid.flow_stop_count": 900,
                                                    "qpid.flow_resume_count": 500})
    await api.poll()
    answer = (await api.client.get(flow_path("shape"))).json()
    assert answer["thresholds"] == {"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500,
                                    "qpid.flow_stop_size": 83886080,
                                    "qpid.flow_resume_size": 73400320}
    assert answer["sources"] == {"count": "arguments", "size": "default"}
    assert answer["depth"] == {"messages": 120, "bytes": 4096}
    assert (answer["flowStopped"], answer["flowStoppedCount"], answer["stale"]) == (
        False, 0, False)
    assert answer["sampledAt"].endswith("Z")
    # the fast path (plain GET) and the routes (any query string) send the same JSON
    routed = (await api.client.get(flow_path("shape"), params={"wait": "0.001"})).json()
    assert routed == answer


@pytest.mark.parametrize("name", ["a/b", "with space", "100%", "заказы", "注文 🚀", "q?x#y"])
async def test_any_queue_name_round_trips(api: InProcessAPI, name: str) -> None:
    api.broker.queue(name)
    await api.poll()
    assert (await api.client.get(flow_path(name))).json()["queue"] == name
    r = await api.client.put(queue_path(name) + "/flow", json={"qpid.flow_stop_count": 3})
    assert r.status_code == 200 and r.json()["queue"] == name


async def test_cached_answer_follows_depth_settings_and_producers(api: InProcessAPI) -> None:
    api.broker.queue("cached", 10)
    await api.poll()
    first = await api.client.get(flow_path("cached"))
    assert (await api.client.get(flow_path("cached"))).content == first.content
    api.broker.queue("cached", 11)
    await api.poll()
    assert (await api.client.get(flow_path("cached"))).json()["depth"]["messages"] == 11
    await api.client.put(queue_path("cached") + "/flow", json={"qpid.flow_stop_count": 10})
    answer = (await api.client.get(flow_path("cached"))).json()
    assert answer["flowStopped"] and answer["sources"]["count"] == "api"
    r = await api.client.get(flow_path("cached"), headers={"X-Producer-Id": "p1",
                                                           "X-Producer-Capacity": "50"})
    # the producer is counted in the answer it gets and in every later one
    assert r.json()["producers"] == {"active": 1, "capacity": 50, "capacityBytes": None,
                                     "publishRate": None}
    assert (await api.client.get(flow_path("cached"))).json()["producers"]["capacity"] == 50


async def test_a_queue_declared_again_never_gets_the_old_body(api: InProcessAPI) -> None:
    api.broker.queue("again", 5)
    await api.poll()
    old = (await api.client.get(flow_path("again"))).json()
    del api.broker.queues[("/", "again")]
    await api.poll()
    await api.poll()  # missing from two polls: gone
    assert (await api.client.get(flow_path("again"))).status_code == 404
    api.broker.queue("again", 7)
    await api.poll()
    new = (await api.client.get(flow_path("again"))).json()
    assert (old["depth"]["messages"], new["depth"]["messages"]) == (5, 7)


async def test_settings_waiting_for_a_queue_are_listed(api: InProcessAPI) -> None:
    await api.client.put(queue_path("later") + "/flow", json={"flow_stop_count": 4})
    listed = (await api.client.get("/queues")).json()
    assert listed == [{"vhost": "/", "queue": "later", "exists": False, "flowStopped": False,
                       "flowStoppedCount": 0, "depth": None, "thresholds": None,
                       "sources": None, "sampledAt": None, "stale": True,
                       "settings": {"qpid.flow_stop_count": 4, "qpid.flow_resume_count": None,
                                    "qpid.flow_stop_size": None,
                                    "qpid.flow_resume_size": None}}]


class DiskFull(Store):
    """The real store, whose writes of states fail while `full` (a full disk mid-write)."""

    full = False

    def save_states(self, states: Mapping[tuple[str, str], StoredState], now: float) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")
        super().save_states(states, now)


async def make_with_disk_full(make_api: Any, tmp_path: Any) -> tuple[InProcessAPI, DiskFull]:
    made: InProcessAPI = await make_api(data_dir=tmp_path / "full")
    store = DiskFull(tmp_path / "full" / "flow-sidecar.sqlite3")
    made.engine.store = store
    made.sidecar.runtime.outbox.store = store
    return made, store


async def test_a_put_that_cannot_commit_changes_nothing(make_api: Any, tmp_path: Any) -> None:
    """Settings and the states they change are one transaction: a failure of either is a
    503 and leaves the settings, the state, the counter and the outbox as they were."""
    api, store = await make_with_disk_full(make_api, tmp_path)
    api.broker.queue("atomic", 600)
    await api.poll()
    before = (await api.client.get(flow_path("atomic"))).json()
    store.full = True
    r = await api.client.put(queue_path("atomic") + "/flow",
                             json={"qpid.flow_stop_count": 500})  # would stop the queue
    assert r.status_code == 503 and "nothing was changed" in r.json()["detail"]
    assert (await api.client.get(flow_path("atomic"))).json() == before
    assert api.engine.stored_settings(("/", "atomic")) is None
    assert Store(tmp_path / "full" / "flow-sidecar.sqlite3").load_settings() == {}
    store.full = False
    r = await api.client.put(queue_path("atomic") + "/flow", json={"qpid.flow_stop_count": 500})
    assert r.status_code == 200 and r.json()["flowStopped"] and r.json()["flowStoppedCount"] == 1


async def test_a_delete_and_defaults_that_cannot_commit_change_nothing(
        make_api: Any, tmp_path: Any) -> None:
    api, store = await make_with_disk_full(make_api, tmp_path)
    api.broker.queue("kept", 600)
    await api.poll()
    await api.client.put(queue_path("kept") + "/flow", json={"qpid.flow_stop_count": 500})
    store.full = True
    assert (await api.client.delete(queue_path("kept") + "/flow")).status_code == 503
    assert (await api.client.put("/defaults", json={
        "defaultFlowStopThreshold": 10, "defaultFlowResumeThreshold": 5,
        "defaultQueueLimit": 100})).status_code == 503
    view = (await api.client.get(queue_path("kept"))).json()
    assert view["settings"]["qpid.flow_stop_count"] == 500 and view["flowStopped"]
    assert (await api.client.get("/defaults")).json()["source"] == "startup"
