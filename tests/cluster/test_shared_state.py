"""Replicas that share their state through the cluster's global parameters
(`--shared-state broker`): settings, defaults, webhook subscriptions and flowStoppedCount
written through one (producerClasses and warning settings among them) are served by all
within a poll; a single-node data directory migrates on its first shared start; a write
the broker cannot take changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.cluster.conftest import ClusterQueues, shared_flags
from tests.utils.cluster import Cluster
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]
Sidecars = Callable[..., SidecarProcess]
STOP_4: dict[str, object] = {"qpid.flow_stop_count": 4, "qpid.flow_resume_count": 2}
DEFAULTS = {"defaultFlowStopThreshold": 50, "defaultFlowResumeThreshold": 40,
            "defaultQueueLimit": 1000}


def answer_of(sidecar: SidecarProcess, queue: str) -> tuple[bool, int, str]:
    f = flow(sidecar, queue)
    return f["flowStopped"], f["flowStoppedCount"], f["sources"]["count"]


def all_say(replicas: list[SidecarProcess], queue: str, expected: tuple[bool, int, str]
            ) -> bool:
    return all(answer_of(r, queue) == expected for r in replicas)


def test_settings_defaults_and_counters_are_one_across_replicas(
        shared_state: Cluster, cluster_queues: ClusterQueues, qname: Names,
        sidecars: Sidecars) -> None:
    queue = cluster_queues.declare(qname("orders"), node=1, messages=5)
    a = sidecars(*shared_flags(shared_state)).start()
    b = sidecars(*shared_flags(shared_state)).start()
    for replica in (a, b):
        wait_depth(replica, queue, 5)

    r = a.put(queue_path(queue) + "/flow", json=STOP_4)
    assert r.status_code == 200, r.text
    eventually(lambda: all_say([a, b], queue, (True, 1, "api")))

    cluster_queues.drain(queue, node=2, messages=4)  # depth 1: below the resume of 2
    eventually(lambda: all_say([a, b], queue, (False, 1, "api")))
    cluster_queues.publish(queue, node=0, messages=4)  # depth 5 again: a second episode
    eventually(lambda: all_say([a, b], queue, (True, 2, "api")))
    # versions are the replica's clock in ms: a long-poll moved to the other replica cannot
    # wait on a number that replica gave another state
    assert flow(a, queue)["version"] > 10**12 and flow(b, queue)["version"] > 10**12
    counters = [v for k, v in shared_state.global_parameters().items() if ".counter." in k]
    assert [(c["queue"], c["count"]) for c in counters] == [(queue, 2)]

    late = sidecars(*shared_flags(shared_state)).start()  # an empty data directory
    eventually(lambda: all_say([late], queue, (True, 2, "api")))

    assert b.delete(queue_path(queue) + "/flow").status_code == 200
    eventually(lambda: all(answer_of(r, queue)[2] == "none" for r in (a, b, late)))

    assert b.put("/defaults", json=DEFAULTS).status_code == 200
    eventually(lambda: all(r.get("/defaults").json()["defaultQueueLimit"] == 1000
                           for r in (a, b, late)))
    assert a.delete("/defaults").status_code == 200
    eventually(lambda: all(r.get("/defaults").json()["source"] == "startup"
                           for r in (a, b, late)))
    for replica in (a, b, late):
        assert "guest" not in replica.log()


def test_a_single_node_data_directory_migrates_on_its_first_shared_start(
        shared_state: Cluster, cluster_queues: ClusterQueues, qname: Names,
        sidecars: Sidecars) -> None:
    queue = cluster_queues.declare(qname("orders"), node=0, messages=5)
    waiting = qname("not-yet")
    single = sidecars("--management-url", shared_state.management_urls[0],
                      "--poll-interval", "0.3").start()
    known(single, queue)
    assert single.put(queue_path(queue) + "/flow", json=STOP_4).status_code == 200
    assert single.put(queue_path(waiting) + "/flow", json=STOP_4).status_code == 200
    eventually(lambda: answer_of(single, queue) == (True, 1, "api"))
    hook = single.http.post(single.url + "/webhooks", timeout=10, json={
        "url": "http://127.0.0.1:9/hook", "secret": "a-secret-of-some-length"})
    assert hook.status_code == 201
    single.stop()
    assert shared_state.global_parameters() == {}

    first = sidecars(*shared_flags(shared_state), data_dir=single.data_dir).start()
    eventually(lambda: "written to the broker's global parameters" in first.log())
    shared = shared_state.global_parameters()
    assert {v["queue"] for k, v in shared.items() if ".settings." in k} == {queue, waiting}
    assert [v["id"] for k, v in shared.items() if ".webhook." in k] == [hook.json()["id"]]
    assert [v["count"] for k, v in shared.items() if ".counter." in k] == [1]

    second = sidecars(*shared_flags(shared_state)).start()
    eventually(lambda: answer_of(second, queue) == (True, 1, "api"))
    stored = second.get(queue_path(waiting)).json()["settings"]
    assert {k: v for k, v in stored.items() if v is not None} == STOP_4
    assert [w["id"] for w in second.get("/webhooks").json()] == [hook.json()["id"]]
    assert "a-secret" not in second.get("/webhooks").text
    assert "a-secret" not in first.log() + second.log()

    # A restart does not migrate again: what was deleted in the shared state stays deleted.
    assert second.delete(queue_path(waiting) + "/flow").status_code == 200
    first.stop()
    first.start()
    eventually(lambda: first.get(queue_path(waiting)).status_code == 404)
    assert first.log().count("written to the broker's global parameters") == 1


def test_a_write_the_broker_cannot_take_changes_nothing(
        shared_state: Cluster, qname: Names, sidecars: Sidecars, tmp_path: Any) -> None:
    queue = qname("orders")
    writer = sidecars(*shared_flags(shared_state)).start()
    assert writer.put(queue_path(queue) + "/flow", json=STOP_4).status_code == 200
    writer.stop()
    # The same data directory, now reading through a node that does not exist.
    cut_off = sidecars("--shared-state", "broker", "--management-url",
                       "http://127.0.0.1:1", "--shared-amqp-url", "127.0.0.1:1",
                       data_dir=writer.data_dir).start(wait_ready=False)
    eventually(lambda: cut_off.get("/healthz").status_code == 200)
    eventually(lambda: cut_off.get(queue_path(queue)).status_code == 200)
    r = cut_off.put(queue_path(queue) + "/flow", json={"qpid.flow_stop_count": 9})
    assert r.status_code == 503, r.text
    assert "nothing was changed" in r.json()["detail"]
    assert cut_off.delete(queue_path(queue) + "/flow").status_code == 503
    assert cut_off.put("/defaults", json=DEFAULTS).status_code == 503
    cached = cut_off.get(queue_path(queue)).json()["settings"]  # the cache serves
    assert {k: v for k, v in cached.items() if v is not None} == STOP_4
    assert cut_off.get("/defaults").json()["source"] == "startup"
    [settings] = [v for k, v in shared_state.global_parameters().items() if ".settings." in k]
    assert settings["settings"] == STOP_4


def test_classes_and_warning_settings_are_one_across_replicas(
        shared_state: Cluster, cluster_queues: ClusterQueues, qname: Names,
        sidecars: Sidecars) -> None:
    """producerClasses and flow.warning_* ride with the queue's shared settings: written
    through one replica, served and applied by the other (docs/graded-flow.md)."""
    queue = cluster_queues.declare(qname("graded"), node=1, messages=60)
    a = sidecars(*shared_flags(shared_state)).start()
    b = sidecars(*shared_flags(shared_state)).start()
    for replica in (a, b):
        wait_depth(replica, queue, 60)
    r = a.put(queue_path(queue) + "/flow", json={
        "qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80,
        "flow.warning_horizon": 60, "flow.warning_fraction": 0.5,
        "producerClasses": {"bulk": 0.5}})
    assert r.status_code == 200, r.text
    path = flow_path(queue)

    def bulk_told(replica: SidecarProcess) -> tuple[bool, list[str]]:
        f = replica.get(path, headers={"X-Producer-Class": "bulk"}).json()
        return f["flowStopped"], f["flowStoppedBy"]

    eventually(lambda: all(bulk_told(r) == (True, ["class:bulk"]) for r in (a, b)))
    assert not flow(b, queue)["flowStopped"]  # 60 of 100: the queue itself flows
    eventually(lambda: flow(b, queue)["warning"])  # 60 >= 0.5 x 100: B applies the fraction
    settings = b.get(queue_path(queue)).json()["settings"]
    assert (settings["producerClasses"], settings["flow.warning_horizon"]) == ({"bulk": 0.5}, 60)
