"""Webhooks from replicas sharing their state: every replica forwards its copy of each event
to the cluster's delivery queue; the queue's single active consumer posts each event once,
numbered by flow episode, with the same webhook-id whichever replica saw it first; warning
episodes alike (numbered the same on every replica, one webhook-id per episode and kind)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from tests.cluster.conftest import ClusterQueues, shared_flags
from tests.utils.cluster import Cluster
from tests.utils.flow import wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import WebhookReceiver

SECRET = "whsec_c2lkZWNhci10ZXN0LXNlY3JldC1rZXktMzItYnl0ZXMh"
STOP_4: dict[str, object] = {"qpid.flow_stop_count": 4, "qpid.flow_resume_count": 2}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET).start()
    yield made
    made.stop()


def test_each_event_is_posted_once_by_one_replica(
        shared_state: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess], receiver: WebhookReceiver) -> None:
    queue = cluster_queues.declare(qname("orders"), node=2, messages=1)
    replicas = [sidecars(*shared_flags(shared_state)).start() for _ in range(2)]
    r = replicas[0].http.post(replicas[0].url + "/webhooks", timeout=10, json={
        "url": receiver.url, "secret": SECRET, "queue": queue, "warnings": True})
    assert r.status_code == 201, r.text
    sub_id = r.json()["id"]
    eventually(lambda: [w["id"] for w in replicas[1].get("/webhooks").json()] == [sub_id])
    for replica in replicas:
        wait_depth(replica, queue, 1)
    assert replicas[1].put(queue_path(queue) + "/flow", json=STOP_4).status_code == 200

    for _ in range(2):  # two episodes: stopped, resumed, stopped, resumed
        cluster_queues.publish(queue, node=0, messages=4)  # depth 5 > 4
        eventually(lambda: all(r.get(queue_path(queue)).json()["flowStopped"]
                               for r in replicas))
        cluster_queues.drain(queue, node=1, messages=4)  # depth 1 < 2
        eventually(lambda: not any(r.get(queue_path(queue)).json()["flowStopped"]
                                   for r in replicas))

    eventually(lambda: len({e.webhook_id for e in receiver.events()}) >= 5, timeout=20)
    events = [e for e in receiver.events() if not e.event["type"].startswith("flow.warning")]
    firsts = {e.webhook_id: e for e in reversed(events)}
    assert sorted((e.event["data"]["sequence"], e.event["type"]) for e in firsts.values()) == [
        (1, "flow.stopped"), (2, "flow.resumed"), (3, "flow.stopped"), (4, "flow.resumed")]
    assert all(e.valid for e in receiver.received)
    assert [e.event["data"]["flowStoppedCount"] for e in events] == [1, 1, 2, 2]
    # both replicas warned (5 is over 90 % of the stop) and forwarded a copy: one event,
    # episode 1 (the queue filled again within the episode's quiet period)
    warnings = [e.event["data"]["episode"] for e in receiver.events()
                if e.event["type"] == "flow.warning"]
    assert warnings == [1]
    ids = Counter(e.webhook_id for e in receiver.events())
    assert max(ids.values()) == 1, f"posted more than once: {ids}"

    def statuses() -> list[dict[str, str]]:
        return [{d["webhookId"]: d["status"] for d in r.get(
            f"/webhooks/{sub_id}/deliveries").json()} for r in replicas]

    # Each replica forwarded its own copy of every event; the delivering one shows how its
    # deliveries went, the other that it handed them over.
    eventually(lambda: sorted(tuple(sorted(set(s.values()))) for s in statuses()) == [
        ("delivered",), ("forwarded",)])
    assert [set(s) for s in statuses()] == [set(ids)] * 2
