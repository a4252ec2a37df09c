"""Settings and counters survive kill -9; a broker outage makes data stale, never flips it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

import pytest

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]


def test_kill_9_keeps_settings_counters_and_state(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names
) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    q = known(sidecar, broker.declare(qname("durable")))
    r = sidecar.put(queue_path(q) + "/flow",
                    json={"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5})
    assert r.status_code == 200
    broker.publish(q, 11)
    assert wait_depth(sidecar, q, 11)["flowStoppedCount"] == 1
    broker.drain(q, 7)
    wait_depth(sidecar, q, 4, stopped=False)
    broker.publish(q, 7)
    before = wait_depth(sidecar, q, 11)
    assert before["flowStopped"] is True and before["flowStoppedCount"] == 2
    broker.drain(q, 3)  # 8: between resume and stop, the hysteresis band
    assert wait_depth(sidecar, q, 8)["flowStopped"] is True

    sidecar.kill()
    sidecar.start()
    after = wait_depth(sidecar, q, 8)
    assert after["flowStopped"] is True, "the state inside the band is remembered"
    assert after["flowStoppedCount"] == 2
    assert after["version"] >= before["version"]
    assert after["thresholds"]["qpid.flow_stop_count"] == 10
    assert after["sources"]["count"] == "api"


@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs the local broker's CLI")
def test_broker_outage_marks_stale_keeps_serving_and_recovers(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names
) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2", "--stale-after", "1.5",
                              "--request-timeout", "1").start()
    q = known(sidecar, broker.declare(qname("outage"), {"qpid.flow_stop_count": 3}))
    broker.publish(q, 4)
    assert wait_depth(sidecar, q, 4)["flowStopped"] is True
    broker.connection.close()
    subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=60)
    try:
        stale = eventually(lambda: (f := flow(sidecar, q))["stale"] and f, timeout=15)
        assert stale["flowStopped"] is True, "--on-stale hold keeps the last state"
        assert stale["depth"]["messages"] == 4
        assert sidecar.get("/readyz").status_code == 503
        assert sidecar.get("/healthz").status_code == 200
        assert "broker poll failed" in sidecar.log()
    finally:
        subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
    # The transient queue went with the stopped app: the recovered sidecar says so.
    eventually(lambda: sidecar.get("/readyz").status_code == 200, timeout=60)
    eventually(lambda: sidecar.get(queue_path(q)).status_code == 404, timeout=10)
    assert "broker poll recovered" in sidecar.log()
