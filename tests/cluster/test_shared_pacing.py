"""Pacing across replicas sharing their state: a producer that reports to one replica only
is offered the same `suggestedRate` by the other, which reads the first's record of
reports (`flow-sidecar.reports.<replica>`) and fits the same broker's figures."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.cluster.conftest import ClusterQueues, shared_flags
from tests.utils.cluster import Cluster
from tests.utils.flow import wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess

STOP_100: dict[str, object] = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80}


def test_a_producer_heard_by_one_replica_is_offered_alike_by_both(
        shared_state: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess]) -> None:
    queue = cluster_queues.declare(qname("paced"), node=1, messages=95)  # warned: >= 90
    a, b = (sidecars(*shared_flags(shared_state, first=i)).start() for i in (0, 2))
    assert a.put(queue_path(queue) + "/flow", json=STOP_100).status_code == 200
    for replica in (a, b):
        wait_depth(replica, queue, 95)
    path = queue_path(queue).replace("/queues/", "/flow/", 1)

    def offered(replica: SidecarProcess, published: int | None = None) -> float | None:
        headers = {"X-Producer-Id": "p"}
        if published is not None:
            headers["X-Producer-Published"] = str(published)
        answer = replica.get(path, headers=headers).json()
        assert not answer["flowStopped"]  # a rate is advice: 95 of 100 flows
        rate: float | None = answer.get("suggestedRate")
        return rate

    sent, started, pairs = 0, time.monotonic(), []
    while time.monotonic() - started < 20:  # p says it sends 20/s, to A only
        sent += 4
        rate_a, rate_b = offered(a, published=sent), offered(b)
        if rate_a and rate_b:
            pairs.append((rate_a, rate_b))
            if len(pairs) >= 3 and all(abs(x - y) <= 0.1 * x for x, y in pairs[-3:]):
                break
        time.sleep(0.2)
    assert len(pairs) >= 3, f"no rate from both replicas within 20 s: {pairs}"
    # the same offer from both, three asks in a row, near what p reported taking place
    assert all(abs(x - y) <= 0.1 * x for x, y in pairs[-3:]), pairs
    assert 5 < pairs[-1][0] < 40, pairs
