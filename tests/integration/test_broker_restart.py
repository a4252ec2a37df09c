"""A broker restart, for real, against the deploy/ensure-rabbitmq4.sh node (never the main
3.10 broker the other tests share): the sidecar's log gets one WARNING per connection that
the outage breaks and one INFO line when it is back, never pika's own lines or a traceback
per reconnection attempt. deploy/test.sh runs it last in a 4.x pass (FLOW_TEST_RABBITMQ4)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.utils.broker_target import AMQP_URL, TargetNode
from tests.utils.sidecar_process import SidecarProcess, eventually

pytestmark = pytest.mark.skipif(not TargetNode().version, reason=(
    "needs a deploy/ensure-rabbitmq4.sh node to restart (deploy/test.sh runs one)"))


def test_a_broker_restart_logs_one_warning_per_connection_and_one_line_on_recovery(
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    node = TargetNode()
    sidecar = sidecar_factory("--poll-interval", "0.2", "--shared-state", "broker",
                              "--shared-amqp-url", AMQP_URL.split("@")[1].split("/")[0]).start()

    def live() -> dict[str, object]:
        answer: dict[str, object] = sidecar.get("/healthz").json()["live"]
        return answer

    eventually(lambda: live()["connected"], timeout=30)
    eventually(lambda: "webhook delivery queue: connected" in sidecar.log(), timeout=30)
    node.stop()
    try:
        eventually(lambda: sidecar.get("/healthz").json()["poller"]["consecutiveFailures"] >= 20,
                   timeout=30)  # 20 failed polls, and as many reconnection attempts
    finally:
        node.start()
    eventually(lambda: live()["connected"] and "the shared state is read again" in sidecar.log()
               and sidecar.get("/healthz").json()["poller"]["consecutiveFailures"] == 0,
               timeout=60)
    eventually(lambda: sidecar.log().count("webhook delivery queue: connected") == 2,
               timeout=60)
    log = sidecar.log()
    assert "Traceback" not in log and " pika." not in log, log[-3000:]
    warnings = [w for w in re.findall(r" WARNING \S+ (.*)", log)  # not the depth source's
                if not w.startswith("queue depth now from the Prometheus endpoint")]
    readers = ("broker poll failed", "live depth: AMQP connection",
               "the shared state could not be read", "webhook delivery queue: connection lost")
    # readers the outage may reach too, by the depth source and the order of the reads
    maybe = ("queue depth from the Prometheus endpoint failed", "broker alarms could not be read")
    # one per reader the outage broke, however often each retried; nothing else. The poll
    # alone may say it twice: with the Prometheus depth source a poll that needs no
    # management read succeeds while the broker stops its management listener before its
    # Prometheus one, and then "recovered" must stand between the two
    said = [next((r for r in readers + maybe if w.startswith(r)), w) for w in warnings]
    once = [s for s in said if s != "broker poll failed"]
    assert len(once) == len(set(once)) and set(said) - set(maybe) == set(readers), warnings
    polls = re.findall(r"broker poll failed|broker poll recovered", log)
    assert polls == ["broker poll failed", "broker poll recovered"] * (len(polls) // 2), polls
    assert len(polls) <= 4, polls
    for back in ("live depth: AMQP connection to vhost '/' is back",
                 "the shared state is read again"):
        assert log.count(back) == 1, back
