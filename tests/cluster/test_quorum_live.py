"""A quorum queue read live while its leader's node stops: RabbitMQ answers a passive
declare of a quorum queue by asking the leader with a 250 ms timeout and says 0 messages
on a timeout or an error (rabbit_quorum_queue). Such an answer is not a sample: a full,
stopped queue must not be released while its leader is gone."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.cluster.conftest import ClusterQueues
from tests.utils.cluster import Cluster
from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess, eventually

# count only, so that a live sample of this queue without consumers could release it
ARGUMENTS = {"x-queue-type": "quorum", "qpid.flow_stop_count": 900,
             "qpid.flow_resume_count": 500, "qpid.flow_stop_size": 0}


def test_a_full_quorum_queue_stays_stopped_while_its_leader_is_away(
        live_cluster: Cluster, cluster_queues: ClusterQueues, qname: Callable[[str], str],
        sidecars: Callable[..., SidecarProcess]) -> None:
    first = live_cluster.nodes[0]
    sidecar = sidecars("--management-url", first.management_url, "--amqp-url",
                       first.amqp_url, "--poll-interval", "0.5").start()
    queue = cluster_queues.declare(qname("quorum-led"), node=1, messages=1000,
                                   arguments=ARGUMENTS)
    assert live_cluster.queue(queue)["leader"].startswith("flowc11@")

    def answer() -> dict[str, object]:
        body: dict[str, object] = sidecar.get(flow_path(queue),
                                              headers={"X-Producer-Id": "p"}).json()
        return body

    stopped = eventually(lambda: (a := answer())["flowStopped"] and a, timeout=30)
    eventually(lambda: answer()["depthSource"] == "live", timeout=30)  # read live
    live_cluster.nodes[1].stop()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = answer()
        assert now["flowStopped"] and now["flowStoppedCount"] == stopped["flowStoppedCount"], \
            now
        time.sleep(0.05)
    assert not [line for line in sidecar.log().splitlines()
                if "QUE-1004" in line and f"qu({queue})" in line]
