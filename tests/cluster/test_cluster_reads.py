"""The sidecar reads a whole three-node cluster through any one node, and fails over between
several `--management-url`s when the node it reads through stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.cluster.conftest import ClusterQueues
from tests.utils.cluster import Cluster
from tests.utils.flow import known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually

QUORUM = {"x-queue-type": "quorum"}


def test_queues_on_every_node_are_read_through_one(
        cluster: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess]) -> None:
    classic = [cluster_queues.declare(qname(f"classic{i}"), node=i, messages=i + 1)
               for i in range(3)]
    quorum = [cluster_queues.declare(qname(f"quorum{i}"), node=i, messages=10 + i,
                                     arguments=QUORUM) for i in range(3)]
    assert len({cluster.queue(q)["node"] for q in classic}) == 3  # one on each node
    assert len({cluster.queue(q)["leader"] for q in quorum}) == 3
    assert all(len(cluster.queue(q)["members"]) == 3 for q in quorum)

    sidecar = sidecars("--management-url", cluster.management_urls[2],
                       "--poll-interval", "0.3").start()
    for i, q in enumerate(classic):
        wait_depth(sidecar, q, i + 1)
    for i, q in enumerate(quorum):
        wait_depth(sidecar, q, 10 + i)


def test_fails_over_when_the_node_it_reads_through_stops(
        live_cluster: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess]) -> None:
    queue = cluster_queues.declare(qname("orders"), node=1, messages=3, arguments=QUORUM)
    urls = live_cluster.management_urls
    sidecar = sidecars(*(arg for url in urls for arg in ("--management-url", url)),
                       "--poll-interval", "0.3", "--stale-after", "3").start()
    known(sidecar, queue)
    wait_depth(sidecar, queue, 3)

    not_ready: list[float] = []
    done = threading.Event()

    def watch_readiness() -> None:
        while not done.is_set():
            if sidecar.get("/readyz").status_code != 200:
                not_ready.append(time.monotonic())
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_readiness)
    watcher.start()
    try:
        live_cluster.nodes[0].stop()  # the first URL's node
        cluster_queues.publish(queue, node=1, messages=2)
        wait_depth(sidecar, queue, 5)
        eventually(lambda: "using http://127.0.0.1:15711 from now on" in sidecar.log())
        time.sleep(2)  # a few more polls through the surviving node
    finally:
        done.set()
        watcher.join()
    assert not not_ready, "the sidecar stopped being ready while another node answered"
    assert "guest" not in sidecar.log()
