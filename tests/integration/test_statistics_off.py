"""A RabbitMQ 4.x node with management statistics denied
(`deprecated_features.permit.management_metrics_collection = false`, as
`RMQ4_DENY_STATS=1 deploy/ensure-rabbitmq4.sh 4.0` starts it): its management API answers
every request but gives no queue depth and no alarm. The sidecar must say so, never stay
silent. deploy/test.sh runs this file against that node (FLOW_TEST_STATISTICS_DENIED=1);
against a broker with statistics it is skipped."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.conftest import Broker
from tests.utils.broker_target import STATISTICS_DENIED
from tests.utils.flow import flow
from tests.utils.sidecar_process import SidecarProcess, eventually

pytestmark = pytest.mark.skipif(not STATISTICS_DENIED, reason=(
    "needs a broker with management statistics denied (deploy/test.sh runs one)"))


def test_no_depth_and_no_alarms_are_degraded_logged_once_and_exported(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5", "--stale-after", "2",
                              "--on-stale", "stop", "--no-live-depth").start()
    queue = broker.declare(qname("blind"), {"qpid.flow_stop_count": 10})
    broker.publish(queue, 20)
    health = eventually(lambda: (h := sidecar.get("/healthz").json())["status"] == "degraded"
                        and len(h["problems"]) == 2 and h, timeout=20)
    assert "management_metrics_collection = true" in health["problems"][0]
    assert "alarm" in health["problems"][1]
    answer = flow(sidecar, queue)
    assert answer["stale"] and answer["depth"] is None
    assert answer["flowStopped"], answer  # --on-stale stop, as for any stale queue
    metrics = sidecar.get("/metrics").text
    assert "flow_sidecar_alarms_unreadable 1.0" in metrics
    assert "flow_sidecar_queues_without_depth 0.0" not in metrics
    eventually(lambda: sidecar.get("/healthz").json()["poller"]["cycles"] >= 10)
    errors = [line for line in sidecar.log().splitlines() if "broker data missing:" in line]
    assert len(errors) == 2, errors  # one per outage, not one per poll
    assert all("ERROR" in line for line in errors)
