"""The fill-rate warning against the real RabbitMQ: a queue filled at a steady rate is
warned, with a positive secondsToStop, before it stops; the warning is one SSE event, one
webhook event and one log line; it never stops the producer; bad settings are 422, also
through flow-config."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from tests.integration.conftest import Broker
from tests.integration.test_cli_and_security import flow_config
from tests.integration.test_signalling import read_sse
from tests.integration.test_webhooks import SECRET
from tests.utils.flow import flow, known
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import WebhookReceiver

Names = Callable[[str], str]
STOP, RATE = 300, 40  # messages, messages/s: the stop is 7.5 s of filling away


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET).start()
    yield made
    made.stop()


def test_bad_warning_settings_are_422_naming_the_key_and_store_nothing(
        broker: Broker, shared_sidecar: SidecarProcess, qname: Names) -> None:
    q = known(shared_sidecar, broker.declare(qname("warn-bad")))
    for body, key in (({"qpid.flow_stop_count": 9, "flow.warning_fraction": 1.5},
                       "flow.warning_fraction"),
                      ({"flow.warning_horizon": -1}, "flow.warning_horizon"),
                      ({"flow.warning_horizon": "soon"}, "flow.warning_horizon")):
        r = shared_sidecar.put(queue_path(q) + "/flow", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", key], r.text
        r = shared_sidecar.put("/vhosts/%2F/defaults", json=body)
        assert r.status_code == 422 and key in r.text, r.text
    stored = shared_sidecar.get(queue_path(q)).json()["settings"]
    assert set(stored.values()) == {None} and "flow.warning_horizon" not in stored
    refused = flow_config(shared_sidecar, "set", q, "--warning-fraction", "2")
    assert refused.returncode == 1 and "flow.warning_fraction" in refused.stderr
    done = flow_config(shared_sidecar, "set", q, "--warning-horizon", "12.5")
    assert done.returncode == 0, done.stderr
    assert shared_sidecar.get(queue_path(q)).json()["settings"]["flow.warning_horizon"] == 12.5


def test_a_steady_fill_is_warned_before_its_stop_once_and_nobody_is_stopped(
        broker: Broker, shared_sidecar: SidecarProcess, qname: Names,
        receiver: WebhookReceiver) -> None:
    q = known(shared_sidecar, broker.declare(qname("warn"), {
        "qpid.flow_stop_count": STOP, "qpid.flow_resume_count": 100}))
    r = shared_sidecar.http.post(shared_sidecar.url + "/webhooks", timeout=10, json={
        "url": receiver.url, "secret": SECRET, "queue": q, "warnings": True})
    assert r.status_code == 201 and r.json()["warnings"] is True, r.text
    events: list[dict[str, Any]] = []

    def listen() -> None:
        with requests.get(shared_sidecar.url + "/events", stream=True, timeout=30,
                          params={"queue": q, "warnings": "true"}) as response:
            events.extend(read_sse(response.iter_lines(decode_unicode=True), 2))
    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    warned: dict[str, Any] | None = None
    started = time.monotonic()
    while warned is None and time.monotonic() - started < 7:  # at most 280 messages
        broker.publish(q, RATE // 10)
        answer = flow(shared_sidecar, q)
        if answer["warning"]:
            warned = answer
        time.sleep(0.1)
    assert warned is not None, flow(shared_sidecar, q)
    print(f"warned {time.monotonic() - started:.1f} s into the fill: {warned['depth']}, "
          f"fillRate {warned['fillRate']}, secondsToStop {warned['secondsToStop']}")
    assert warned["flowStopped"] is False and warned["flowStoppedCount"] == 0
    assert warned["secondsToStop"] > 0 and warned["fillRate"] > 0
    listener.join(10)
    assert [e["event"] for e in events] == ["snapshot", "flow.warning"], events
    assert events[1]["data"]["queue"] == q and events[1]["data"]["episode"] == 1
    hooks = eventually(lambda: [e for e in receiver.events() if e.valid], timeout=10)
    assert [h.event["type"] for h in hooks] == ["flow.warning"]
    assert hooks[0].event["data"]["queue"] == q
    assert shared_sidecar.log().count(f"qu({q})] FSW-4301 : Flow Warning") == 1
    assert [e.event["type"] for e in receiver.events() if e.valid] == ["flow.warning"]  # once
    assert flow(shared_sidecar, q)["flowStopped"] is False  # advice: it stops nobody
