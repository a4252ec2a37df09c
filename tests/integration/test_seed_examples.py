"""The seed documents' worked examples, against the real broker through the running service."""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess


def test_thousand_message_queue_stops_above_900_and_resumes_below_500(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Callable[[str], str]
) -> None:
    q = known(shared_sidecar, broker.declare(
        qname("orders"), {"x-max-length": 1000, "x-overflow": "reject-publish"}))
    r = shared_sidecar.put(queue_path(q) + "/flow",
                           json={"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500})
    assert r.status_code == 200, r.text
    assert r.json()["sources"] == {"count": "api", "size": "default"}

    broker.publish(q, 900)
    f = wait_depth(shared_sidecar, q, 900)
    assert f["flowStopped"] is False, "900 is not above a stop of 900"

    broker.publish(q, 1)
    f = wait_depth(shared_sidecar, q, 901)
    assert f["flowStopped"] is True and f["flowStoppedCount"] == 1

    broker.drain(q, 401)  # 500 left: not below a resume of 500
    f = wait_depth(shared_sidecar, q, 500)
    assert f["flowStopped"] is True

    broker.drain(q, 1)
    # the size is watched (the default queue limit): a live 499 shows at once, the resume
    # comes with the statistics that say the bytes are under their resume too
    f = wait_depth(shared_sidecar, q, 499, stopped=False)
    assert f["flowStoppedCount"] == 1
    assert f["thresholds"]["qpid.flow_stop_count"] == 900
    assert "QUE-1003 : Overfull" in shared_sidecar.log()
    assert f"[vh(/)/qu({q})] QUE-1004 : Underfull" in shared_sidecar.log()


def test_count_or_bytes_stop_and_both_resume(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Callable[[str], str]
) -> None:
    """10K bytes / 5000 messages max; stop at 4000 msgs or 8K bytes, resume under 3000 and 6K."""
    q = known(shared_sidecar, broker.declare(qname("mixed"), {
        "x-max-length": 5000, "x-max-length-bytes": 10240, "x-overflow": "reject-publish"}))
    r = shared_sidecar.put(queue_path(q) + "/flow", json={
        "qpid.flow_stop_count": 4000, "qpid.flow_resume_count": 3000,
        "qpid.flow_stop_size": 8192, "qpid.flow_resume_size": 6144})
    assert r.status_code == 200, r.text

    broker.publish(q, 4001)  # 4001 bytes: only the count crosses
    f = wait_depth(shared_sidecar, q, 4001)
    assert f["flowStopped"] is True
    broker.drain(q, 1001)  # 3000 msgs, 3000 bytes: count not below 3000
    assert wait_depth(shared_sidecar, q, 3000)["flowStopped"] is True
    broker.drain(q, 1)
    wait_depth(shared_sidecar, q, 2999, stopped=False)
    broker.drain(q, 2999)

    broker.publish(q, 9, b"b" * 1000)  # 9 msgs, 9000 bytes: only the size crosses
    f = wait_depth(shared_sidecar, q, 9, nbytes=9000)
    assert f["flowStopped"] is True and f["flowStoppedCount"] == 2
    broker.drain(q, 2)  # 7000 bytes: not below 6144
    assert wait_depth(shared_sidecar, q, 7)["flowStopped"] is True
    broker.drain(q, 1)  # 6000 bytes and 6 msgs: both below resume
    wait_depth(shared_sidecar, q, 6, stopped=False)
