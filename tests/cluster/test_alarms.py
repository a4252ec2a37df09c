"""RabbitMQ's alarms on a real three-node cluster: a node that goes down takes its alarms
with it, as RabbitMQ itself does ("resource limit alarm cleared for dead node")."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.cluster.conftest import ClusterQueues
from tests.utils.cluster import Cluster
from tests.utils.flow import flow, known
from tests.utils.sidecar_process import SidecarProcess, eventually


def test_the_alarm_of_a_node_that_stops_clears(
        live_cluster: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess]) -> None:
    queue = cluster_queues.declare(qname("orders"), node=0, messages=1)
    sidecar = sidecars("--management-url", live_cluster.management_urls[0],
                       "--management-url", live_cluster.management_urls[1],
                       "--poll-interval", "0.3").start()
    known(sidecar, queue)
    assert flow(sidecar, queue)["flowStopped"] is False

    doomed = live_cluster.nodes[2]
    doomed.ctl("set_disk_free_limit", "100000GB")  # more than any disk has: alarm
    eventually(lambda: flow(sidecar, queue)["flowStopped"], timeout=30)
    assert "broker-alarm" in flow(sidecar, queue)["flowStoppedBy"]

    doomed.stop()
    stopped_at = time.monotonic()
    running = {n["name"]: n.get("running") for n in
               live_cluster.live_api("GET", "/api/nodes").json()}
    assert running[f"{doomed.name}@{next(iter(running)).partition('@')[2]}"] is False
    eventually(lambda: not flow(sidecar, queue)["flowStopped"], timeout=10)
    took = time.monotonic() - stopped_at
    print(f"\nqueues flowing {took:.2f}s after the alarmed node stopped")
    assert took < 3.0, f"queue flowing again {took:.1f} s after the alarmed node stopped"
    assert "disk alarm cleared" in sidecar.log()
