"""Producer classes through the API, in process over a scripted broker: `producerClasses`
in the queue's and the vhost's settings, what `/flow` answers a producer that says its
class (`X-Producer-Class`), on the fast path and the routes, classes in `/queues`, grants
for a class, and stopped classes across a restart (docs/graded-flow.md#producer-classes)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import InProcessAPI, MakeAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio

BULK = {"X-Producer-Class": "bulk"}
SETTINGS = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80,
            "producerClasses": {"bulk": 0.5}}


async def classed(make_api: MakeAPI, depth: int = 10, **options: Any) -> InProcessAPI:
    """A sidecar with queue `jobs` (stop 100, resume 80, bulk 0.5: 50/40) at `depth`."""
    api: InProcessAPI = await make_api(default_queue_limit=0, **options)
    api.broker.queue("jobs", depth, depth * 10)
    await api.poll()
    r = await api.client.put(queue_path("jobs") + "/flow", json=SETTINGS)
    assert r.status_code == 200, r.text
    return api


async def at_depth(api: InProcessAPI, depth: int) -> None:
    api.broker.queue("jobs", depth, depth * 10)
    await api.poll()


async def flow(api: InProcessAPI, headers: dict[str, str] | None = None,
               routed: bool = False) -> dict[str, Any]:
    """The /flow answer, from the fast path or (`routed`) the documented route."""
    params = {"wait": "0.001"} if routed else None
    r = await api.client.get(flow_path("jobs"), headers=headers, params=params)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def test_a_class_stops_at_its_fraction_and_resumes_under_its_resume(
        make_api: MakeAPI) -> None:
    api = await classed(make_api)
    await at_depth(api, 60)
    for routed in (False, True):
        bulk = await flow(api, BULK, routed)
        assert (bulk["flowStopped"], bulk["flowStoppedBy"]) == (True, ["class:bulk"])
        assert bulk["flowStopReasons"][-1]["by"] == "class:bulk"
        assert not bulk["measuredFlowStopped"]
    # no class, or one the queue does not define: the queue's own answer, byte for byte
    plain = (await api.client.get(flow_path("jobs"))).content
    for headers in ({"X-Producer-Class": "critical"}, {}):
        assert (await api.client.get(flow_path("jobs"), headers=headers)).content == plain
    assert not (await flow(api))["flowStopped"]
    await at_depth(api, 45)  # under the class's stop, over its resume: still stopped
    assert (await flow(api, BULK))["flowStopped"]
    await at_depth(api, 39)
    bulk = await flow(api, BULK)
    assert (bulk["flowStopped"], bulk["flowStoppedBy"]) == (False, [])
    await at_depth(api, 120)  # the queue's own reasons first, then the class
    assert (await flow(api, BULK))["flowStoppedBy"] == ["queue", "class:bulk"]


async def test_classes_are_shown_in_the_queue_view_and_its_settings(make_api: MakeAPI) -> None:
    api = await classed(make_api)
    await at_depth(api, 60)
    view = (await api.client.get(queue_path("jobs"))).json()
    assert view["settings"]["producerClasses"] == {"bulk": 0.5}
    assert view["classes"] == {"bulk": {"fraction": 0.5, "flowStopped": True, "thresholds": {
        "qpid.flow_stop_count": 50, "qpid.flow_resume_count": 40,
        "qpid.flow_stop_size": None, "qpid.flow_resume_size": None}}}
    listed = (await api.client.get("/queues")).json()
    assert [q["classes"]["bulk"]["flowStopped"] for q in listed if q["queue"] == "jobs"] == [
        True]
    assert "producerClasses" not in (await flow(api)) and "classes" not in (await flow(api))


@pytest.mark.parametrize(("classes", "field"), [
    ({"bulk": 1.2}, "producerClasses.bulk"), ({"bulk": "0.5"}, "producerClasses.bulk"),
    ({"bulk": 0}, "producerClasses.bulk"), ({"no space": 0.5}, "producerClasses"),
    ([0.5], "producerClasses")])
async def test_a_refused_class_names_its_field_and_stores_nothing(
        make_api: MakeAPI, classes: object, field: str) -> None:
    api = await classed(make_api)
    r = await api.client.put(queue_path("jobs") + "/flow",
                             json={"qpid.flow_stop_count": 7, "producerClasses": classes})
    assert r.status_code == 422, r.text
    assert field in str(r.json()["detail"])
    view = (await api.client.get(queue_path("jobs"))).json()
    assert view["settings"]["qpid.flow_stop_count"] == 100  # nothing half-written
    assert view["settings"]["producerClasses"] == {"bulk": 0.5}


@pytest.mark.parametrize("value", ["", "no space", "-lead", "x" * 65, "é"])
async def test_a_bad_class_header_is_a_422_naming_it_on_both_paths(
        make_api: MakeAPI, value: str) -> None:
    api = await classed(make_api)
    for params in (None, {"wait": "0.001"}):
        r = await api.client.get(flow_path("jobs"), params=params,
                                 headers={"X-Producer-Class": value.encode()})
        assert r.status_code == 422, r.text
        assert "x-producer-class" in r.text.lower()


async def test_the_queue_setting_wins_over_the_vhost_default_whole(make_api: MakeAPI) -> None:
    api = await classed(make_api)
    api.broker.queue("other", 60, 600, arguments={"qpid.flow_stop_count": 100})
    await api.poll()
    r = await api.client.put("/vhosts/%2F/defaults",
                             json={"producerClasses": {"bulk": 0.9, "batch": 0.5}})
    assert r.status_code == 200, r.text
    assert r.json()["queueDefaults"]["producerClasses"] == {"bulk": 0.9, "batch": 0.5}
    await at_depth(api, 60)
    other = (await api.client.get(queue_path("other"))).json()["classes"]
    assert (other["batch"]["flowStopped"], other["bulk"]["flowStopped"]) == (True, False)
    jobs = (await api.client.get(queue_path("jobs"))).json()["classes"]
    assert list(jobs) == ["bulk"] and jobs["bulk"]["flowStopped"]  # its own 0.5, not 0.9
    bad = await api.client.put("/vhosts/%2F/defaults", json={"producerClasses": {"b": 2}})
    assert bad.status_code == 422 and "producerClasses.b" in bad.text
    assert (await api.client.delete("/vhosts/%2F/defaults")).status_code == 200
    await api.poll()
    assert "classes" not in (await api.client.get(queue_path("other"))).json()


async def test_a_stopped_class_stays_stopped_across_a_restart(make_api: MakeAPI,
                                                              tmp_path: Any) -> None:
    data = tmp_path / "kept"
    api = await classed(make_api, data_dir=data)
    await at_depth(api, 60)
    assert (await flow(api, BULK))["flowStopped"]
    again: InProcessAPI = await make_api(data_dir=data, broker=api.broker,
                                         default_queue_limit=0)
    api.broker.queue("jobs", 30, 300)  # under the class's resume, but read no later than
    await again.poll()  # the process before may have seen the queue: not a release
    answer = (await again.client.get(flow_path("jobs"), headers=BULK)).json()
    assert answer["flowStoppedBy"] == ["class:bulk"]
    view = (await again.client.get(queue_path("jobs"))).json()
    assert view["settings"]["producerClasses"] == {"bulk": 0.5}


async def test_another_replicas_counter_keeps_a_restored_class_stopped(
        make_api: MakeAPI, tmp_path: Any) -> None:
    """Shared state applies other replicas' counters (`raise_count`) before the first poll
    reads the queues in: the floor must not drop what was stored of the stopped class."""
    data = tmp_path / "kept"
    api = await classed(make_api, data_dir=data)
    await at_depth(api, 60)
    again: InProcessAPI = await make_api(data_dir=data, broker=api.broker,
                                         default_queue_limit=0)
    again.engine.raise_count(("/", "jobs"), 5)
    api.broker.queue("jobs", 30, 300)
    await again.poll()
    answer = (await again.client.get(flow_path("jobs"), headers=BULK)).json()
    assert answer["flowStoppedBy"] == ["class:bulk"] and answer["flowStoppedCount"] == 5


async def test_a_deleted_queue_leaves_no_stopped_class_behind(make_api: MakeAPI) -> None:
    """A queue deleted while a class was stopped and declared again empty: its class flows
    (the queue's own stop goes with the queue, so does its classes')."""
    api = await classed(make_api)
    await at_depth(api, 60)
    assert (await flow(api, BULK))["flowStopped"]
    del api.broker.queues[("/", "jobs")]
    await api.poll()
    await api.poll()  # missing from two polls: deleted
    await at_depth(api, 0)
    assert (await flow(api, BULK))["flowStoppedBy"] == []


async def test_a_class_is_granted_only_the_headroom_below_its_stop(make_api: MakeAPI) -> None:
    api = await classed(make_api, depth=30)
    await at_depth(api, 30)

    async def grant(headers: dict[str, str]) -> int:
        r = await api.client.post("/grants/%2F/jobs", json={"messages": 500},
                                  headers={"X-Producer-Id": "p", **headers})
        assert r.status_code == 200, r.text
        granted: int = r.json()["messages"]
        return granted

    assert await grant(BULK) == 20  # its stop 50, depth 30
    assert await grant({}) == 50  # the queue's stop 100 less depth 30 and the 20 out
    assert await grant(BULK) == 0
    bad = await api.client.post("/grants/%2F/jobs", json={"messages": 1},
                                headers={"X-Producer-Class": "a b"})
    assert bad.status_code == 422 and "x-producer-class" in bad.text.lower()


async def test_classes_another_replica_stored_are_adopted_and_dropped(
        make_api: MakeAPI) -> None:
    api = await classed(make_api)
    await at_depth(api, 60)
    key = ("/", "jobs")
    settings = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80}
    api.engine.adopt_shared({key: settings}, {}, 1.0, {key: {"bulk": 0.7, "batch": 0.5}})
    assert api.engine.stored_classes(key) == {"bulk": 0.7, "batch": 0.5}
    told = (await flow(api, {"X-Producer-Class": "batch"}))
    assert told["flowStoppedBy"] == ["class:batch"]
    assert (await flow(api, BULK))["flowStopped"]  # stopped, 60 not under its new resume (56)
    api.engine.adopt_shared({key: settings}, {}, 2.0, {key: None})  # classes removed there
    assert api.engine.stored_classes(key) is None
    assert not (await flow(api, {"X-Producer-Class": "batch"}))["flowStopped"]
