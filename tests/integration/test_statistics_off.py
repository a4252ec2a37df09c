"""A RabbitMQ 4.x node with management statistics denied
(`deprecated_features.permit.management_metrics_collection = false`, as
`RMQ4_DENY_STATS=1 deploy/ensure-rabbitmq4.sh 4.0` starts it): its management API answers
every request but gives no queue depth, no effective policy and no alarm. With
`--depth-source management` the sidecar counts on the queue totals the API still gives
(sizes unwatched) and says the alarms are missing, never silent; with the default (auto)
it reads depths and alarms from the node's Prometheus endpoint instead and works as
usual. deploy/test.sh runs this file against that node (FLOW_TEST_STATISTICS_DENIED=1);
against a broker with statistics it is skipped."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.conftest import Broker
from tests.utils.broker_target import STATISTICS_DENIED, TargetNode
from tests.utils.flow import flow
from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port

pytestmark = pytest.mark.skipif(not STATISTICS_DENIED, reason=(
    "needs a broker with management statistics denied (deploy/test.sh runs one)"))


@pytest.mark.parametrize("source", [
    ("--depth-source", "management"),
    ("--depth-source", "auto", "--prometheus-url", f"http://127.0.0.1:{free_port()}"),
], ids=["management", "auto without prometheus"])
def test_queue_totals_count_with_the_size_unwatched_and_no_alarms_are_degraded(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess], source: tuple[str, ...]) -> None:
    """Without statistics the management API still gives each queue's message counts
    (`disable_stats=true&enable_queue_totals=true`), but no bytes and no alarms: flow
    control on counts, the size dimension unwatched and saying why, the alarms degraded."""
    # the totals are read once no queue had figures for 6 s (a new 4.x queue has none for
    # its first seconds): a --stale-after above that reports no depth gap meanwhile
    sidecar = sidecar_factory("--poll-interval", "0.5", "--stale-after", "8",
                              "--on-stale", "stop", "--no-live-depth", *source).start()
    queue = broker.declare(qname("blind"), {"qpid.flow_stop_count": 10})
    broker.publish(queue, 20)
    answer = eventually(lambda: (a := flow(sidecar, queue))["depth"] and a, timeout=30)
    assert answer["depth"] == {"messages": 20, "bytes": None} and answer["flowStopped"]
    assert answer["sources"]["size"] == "none"
    assert any("message counts only" in w for w in answer["configWarnings"]), answer
    health = eventually(lambda: (h := sidecar.get("/healthz").json())["status"] == "degraded"
                        and h, timeout=20)
    assert health["depthSource"]["active"] == "queue-totals"
    assert len(health["problems"]) == 1 and "alarm" in health["problems"][0]
    assert "flow_sidecar_alarms_unreadable 1.0" in sidecar.get("/metrics").text
    def missing() -> list[str]:
        return [line for line in sidecar.log().splitlines() if "broker data missing:" in line]

    eventually(missing, timeout=20)
    cycles = sidecar.get("/healthz").json()["poller"]["cycles"]
    eventually(lambda: sidecar.get("/healthz").json()["poller"]["cycles"] >= cycles + 10)
    errors = missing()
    assert len(errors) == 1 and "ERROR" in errors[0], errors  # once, not once a poll
    assert "alarm" in errors[0]


def test_auto_reads_depth_policies_and_alarms_from_prometheus(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5", "--no-live-depth").start()
    explicit = broker.declare(qname("argued"), {"qpid.flow_stop_count": 10})
    limited = broker.declare(qname("limited"))
    broker.set_policy(qname("limit"), f"^{limited}$",
                      {"max-length": 100, "overflow": "reject-publish"})
    broker.publish(explicit, 11)
    stopped = eventually(lambda: (a := flow(sidecar, explicit))["flowStopped"] and a,
                         timeout=30)
    assert stopped["depth"]["messages"] == 11
    # the bytes come with the next read of them, as often as their cost allows
    eventually(lambda: flow(sidecar, explicit)["depth"]["bytes"] == 11, timeout=30)
    # the policy's max-length, worked out from the policy list: defaults 80 % / 70 %
    defaults = eventually(lambda: (a := flow(sidecar, limited))["sources"]["count"]
                          == "default" and a, timeout=40)
    assert defaults["thresholds"]["qpid.flow_stop_count"] == 80
    health = sidecar.get("/healthz").json()
    assert health["status"] == "ok" and health["problems"] == [], health
    assert health["depthSource"]["active"] == "prometheus"
    assert health["depthSource"]["alarmsFrom"] == "prometheus"
    assert "queue depth now from the Prometheus endpoint" in sidecar.log()
    node = TargetNode()
    node.ctl("set_vm_memory_high_watermark", "0.0001")  # far below what the node uses
    try:
        reason = eventually(lambda: (a := flow(sidecar, limited))["flowStopReasons"]
                            and a["flowStopReasons"][0], timeout=30)
        assert reason["by"] == "broker-alarm" and reason["detail"].startswith("memory alarm")
    finally:
        node.ctl("set_vm_memory_high_watermark", "0.4")
    eventually(lambda: not flow(sidecar, limited)["flowStopped"], timeout=30)


def test_prometheus_mode_sees_new_and_deleted_queues_between_listings(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5", "--no-live-depth",
                              "--depth-source", "prometheus").start()
    eventually(lambda: sidecar.get("/healthz").json()["poller"]["cycles"] >= 2)
    queue = broker.declare(qname("fresh"), {"qpid.flow_stop_count": 10})  # after a listing
    broker.publish(queue, 11)
    eventually(lambda: (r := sidecar.get(flow_path(queue))).status_code == 200
               and r.json()["flowStopped"], timeout=20)
    assert sidecar.get("/healthz").json()["depthSource"]["active"] == "prometheus"
    broker.channel.queue_delete(queue)
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 404, timeout=20)
