"""Where thresholds come from, checked against the real broker through the running service."""

from __future__ import annotations

from collections.abc import Callable

import pika
import pytest

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]


def test_defaults_are_80_70_percent_of_x_max_length_on_reject_publish_queue(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(
        qname("dflt"), {"x-max-length": 100, "x-overflow": "reject-publish"}))
    f = flow(shared_sidecar, q)
    assert f["sources"] == {"count": "default", "size": "default"}
    assert f["thresholds"]["qpid.flow_stop_count"] == 80
    assert f["thresholds"]["qpid.flow_resume_count"] == 70
    # no max-length-bytes: the byte maximum is --default-queue-limit (100 MiB)
    assert f["thresholds"]["qpid.flow_stop_size"] == 83886080
    broker.publish(q, 81)
    assert wait_depth(shared_sidecar, q, 81)["flowStopped"] is True
    broker.drain(q, 12)
    wait_depth(shared_sidecar, q, 69, stopped=False)


def test_defaults_from_max_length_bytes_set_by_a_policy(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = qname("polbytes")
    broker.set_policy(q, f"^{q}$", {"max-length-bytes": 1000, "overflow": "reject-publish"})
    known(shared_sidecar, broker.declare(q))
    # the management API may list the new queue a moment before its effective policy
    f = eventually(lambda: (a := flow(shared_sidecar, q))["limits"]["maxLengthBytes"] and a)
    assert f["limits"]["maxLengthBytes"] == 1000 and f["limits"]["ring"] is False
    assert (f["thresholds"]["qpid.flow_stop_size"], f["thresholds"]["qpid.flow_resume_size"]) \
        == (800, 700)
    assert f["sources"]["size"] == "default" and f["sources"]["count"] == "none"
    broker.publish(q, 9, b"x" * 100)  # 900 bytes > 800
    # RabbitMQ may refresh `messages` and `message_bytes` a round apart, either first (4.3
    # has shown bytes 900 with messages still 0): wait for both
    stopped = eventually(lambda: (a := flow(shared_sidecar, q))["depth"]
                         and a["depth"]["bytes"] == 900 and a["depth"]["messages"] == 9 and a)
    assert stopped["flowStopped"] is True and stopped["depth"]["messages"] == 9


def test_drop_head_ring_queue_gets_no_defaults(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("ring"), {"x-max-length": 100}))
    f = flow(shared_sidecar, q)
    assert f["limits"]["ring"] is True
    assert f["sources"] == {"count": "none", "size": "none"}
    broker.publish(q, 100)
    wait_depth(shared_sidecar, q, 100, stopped=False)


def test_declare_arguments_are_honoured_and_api_overrides_per_dimension(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("args"), {
        "qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5,
        "qpid.flow_stop_size": 5000, "qpid.flow_resume_size": 4000}))
    f = flow(shared_sidecar, q)
    assert f["sources"] == {"count": "arguments", "size": "arguments"}
    broker.publish(q, 11)
    assert wait_depth(shared_sidecar, q, 11)["flowStopped"] is True

    # The API takes the count dimension over; the size dimension stays with the arguments.
    r = shared_sidecar.put(queue_path(q) + "/flow", json={"flow_stop_count": 20})
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["sources"] == {"count": "api", "size": "arguments"}
    assert view["thresholds"]["qpid.flow_stop_count"] == 20
    assert view["thresholds"]["qpid.flow_resume_count"] == 20  # unset resume = stop
    assert view["thresholds"]["qpid.flow_stop_size"] == 5000
    # re-evaluated against the last depth at once; with its size watched, the queue resumes
    # on the first statistics newer than its last live sample (an upper bound of both)
    eventually(lambda: flow(shared_sidecar, q)["flowStopped"] is False)


def test_both_stops_zero_disable_flow_control(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(
        qname("off"), {"x-max-length": 100, "x-overflow": "reject-publish"}))
    broker.publish(q, 90)
    assert wait_depth(shared_sidecar, q, 90)["flowStopped"] is True
    r = shared_sidecar.put(queue_path(q) + "/flow",
                           json={"qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0})
    assert r.status_code == 200
    assert r.json()["flowStopped"] is False
    assert r.json()["sources"] == {"count": "disabled", "size": "disabled"}


def test_bad_declare_arguments_are_reported_not_used(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("badargs"), {
        "x-max-length": 100, "x-overflow": "reject-publish",
        "qpid.flow_stop_count": 50, "qpid.flow_resume_count": 60}))
    f = flow(shared_sidecar, q)
    assert f["sources"]["count"] == "default"
    assert f["configErrors"] == ["arguments: qpid.flow_resume_count=60 must be less or equal "
                                 "to qpid.flow_stop_count=50"]
    assert shared_sidecar.log().count(f"qu({q})] flow configuration ignored") == 1


def test_invalid_settings_are_refused_and_nothing_is_stored(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(
        qname("refuse"), {"x-max-length": 1000, "x-overflow": "reject-publish"}))
    path = queue_path(q) + "/flow"
    assert shared_sidecar.put(path, json={"qpid.flow_stop_count": 900}).status_code == 200
    for body, key, text in [
        ({"qpid.flow_stop_count": 500, "qpid.flow_resume_count": 600}, "qpid.flow_resume_count",
         "qpid.flow_resume_count=600 must be less or equal to qpid.flow_stop_count=500"),
        ({"qpid.flow_stop_count": 1200}, "qpid.flow_stop_count",
         "qpid.flow_stop_count=1200 must be less than max-length=1000"),
    ]:
        r = shared_sidecar.put(path, json=body)
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["body", key] and text in detail["msg"]
    stored = shared_sidecar.get(queue_path(q)).json()["settings"]
    assert stored["qpid.flow_stop_count"] == 900 and stored["qpid.flow_resume_count"] is None


def test_string_flow_arguments_apply_as_the_management_ui_declares_them(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    """The UI sends unknown arguments as strings (pika sends a str as longstr, the same)."""
    q = known(shared_sidecar, broker.declare(qname("strargs"), {
        "qpid.flow_stop_count": "10", "qpid.flow_resume_count": "5"}))
    f = flow(shared_sidecar, q)
    assert f["configErrors"] == []
    assert f["sources"]["count"] == "arguments"
    assert (f["thresholds"]["qpid.flow_stop_count"], f["thresholds"]["qpid.flow_resume_count"]) \
        == (10, 5)
    broker.publish(q, 11)
    assert wait_depth(shared_sidecar, q, 11)["flowStopped"] is True


def test_the_broker_refuses_a_string_max_length_so_limits_stay_integers(
    broker: Broker, qname: Names
) -> None:
    """Why `x-max-length` & co. are read as integers only: RabbitMQ refuses the declare."""
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        broker.channel.queue_declare(qname("strmax"), arguments={"x-max-length": "10"})
    assert refused.value.reply_code == 406 and "expected integer" in refused.value.reply_text
    broker.channel = broker.connection.channel()


def test_a_stream_has_unknown_bytes_and_no_size_threshold(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    """RabbitMQ lists streams without message_bytes: unknown bytes, not 0 bytes."""
    q = qname("stream")
    broker.channel.queue_declare(q, durable=True, arguments={
        "x-queue-type": "stream", "qpid.flow_stop_count": 3})
    broker.created_queues.append(("/", q))
    broker.publish(q, 4)
    f = wait_depth(shared_sidecar, q, 4)
    assert f["depth"] == {"messages": 4, "bytes": None}
    assert f["sources"] == {"count": "arguments", "size": "none"}
    assert f["thresholds"]["qpid.flow_stop_size"] is None
    assert any("not watched: the broker reports no byte count" in w
               for w in f["configWarnings"])
    assert f["flowStopped"] is True  # the count dimension still applies
    metrics = shared_sidecar.get("/metrics").text
    assert f'flow_sidecar_queue_messages_bytes{{queue="{q}"' not in metrics
