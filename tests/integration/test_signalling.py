"""Long-poll, Server-Sent Events, exchange flow and the producer registry, for real."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote

import requests

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]


def test_long_poll_returns_at_once_when_version_differs(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("lp-now")))
    version = flow(shared_sidecar, q)["version"]
    start = time.monotonic()
    r = shared_sidecar.get(flow_path(q), params={"since": version + 1000, "wait": 20})
    assert r.status_code == 200 and time.monotonic() - start < 1
    start = time.monotonic()
    r = shared_sidecar.get(flow_path(q), params={"since": version, "wait": 0.5})
    assert r.status_code == 200 and r.json()["version"] == version
    assert 0.45 < time.monotonic() - start < 3


def changed_at(answer: dict[str, Any]) -> float:
    """When the service changed the queue's state (its own clock, this machine's)."""
    return datetime.fromisoformat(answer["lastTransitionAt"]).timestamp()


def test_long_poll_waiter_wakes_within_100ms_of_the_change(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("lp-wake")))
    broker.publish(q, 5)
    before = wait_depth(shared_sidecar, q, 5)
    assert before["flowStopped"] is False
    woke: dict[str, Any] = {}

    def waiter() -> None:
        r = requests.get(shared_sidecar.url + flow_path(q),
                         params={"since": before["version"], "wait": 30}, timeout=40)
        woke["at"] = time.time()
        woke["answer"] = r.json()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)  # the waiter is parked in the service
    r = shared_sidecar.put(queue_path(q) + "/flow", json={"qpid.flow_stop_count": 4})
    thread.join(10)
    assert r.json()["flowStopped"] is True
    assert woke["answer"]["flowStopped"] is True
    assert woke["answer"]["version"] > before["version"]
    latency = woke["at"] - changed_at(woke["answer"])
    print(f"long-poll wake-up after the change: {latency * 1000:.1f} ms")
    assert 0 <= latency < 0.1


def test_bad_long_poll_parameters_are_422(shared_sidecar: SidecarProcess) -> None:
    for params, field in [({"wait": "-1", "since": "1"}, "wait"), ({"wait": "x"}, "wait"),
                          ({"wait": "1000"}, "wait"), ({"since": "-5"}, "since"),
                          ({"since": "1.5"}, "since")]:
        r = shared_sidecar.get("/flow/any-queue", params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"][0]["loc"] == ["query", field]


def read_sse(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """The next `count` events of a stream's lines, as {'id', 'event', 'data'}."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if not line:
            if current:
                events.append(current)
                current = {}
                if len(events) == count:
                    return events
            continue
        field, _, value = line.partition(": ")
        current[field] = json.loads(value) if field == "data" else value
    return events


def test_sse_stream_of_one_queue_with_resume(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    q = known(shared_sidecar, broker.declare(qname("sse")))
    path = queue_path(q) + "/flow"
    with requests.get(shared_sidecar.url + "/events", params={"queue": q}, stream=True,
                      timeout=30) as response:
        stream = response.iter_lines(decode_unicode=True)
        snapshot = read_sse(stream, 1)[0]
        assert snapshot["event"] == "snapshot" and snapshot["data"]["queue"] == q
        broker.publish(q, 3)
        wait_depth(shared_sidecar, q, 3)
        shared_sidecar.put(path, json={"qpid.flow_stop_count": 2})
        first = read_sse(stream, 1)[0]
        latency = time.time() - changed_at(flow(shared_sidecar, q))
        assert first["event"] == "flow" and first["data"]["flowStopped"] is True
        assert first["data"]["transition"] == "overfull"
        assert first["data"]["flowStoppedCount"] == 1
        print(f"SSE event after the change: {latency * 1000:.1f} ms")
        assert 0 <= latency < 0.1
    # Disconnected; a change happens; the client resumes from its last id.
    shared_sidecar.put(path, json={"qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0})
    with requests.get(shared_sidecar.url + "/events", params={"queue": q}, stream=True,
                      headers={"Last-Event-ID": first["id"]}, timeout=30) as response:
        missed = read_sse(response.iter_lines(decode_unicode=True), 1)[0]
        assert missed["event"] == "flow" and missed["data"]["flowStopped"] is False
        assert missed["data"]["version"] > first["data"]["version"]
    with requests.get(shared_sidecar.url + "/events", params={"queue": q}, stream=True,
                      headers={"Last-Event-ID": "another-run-7"}, timeout=30) as response:
        assert read_sse(response.iter_lines(decode_unicode=True), 1)[0]["event"] == "snapshot"


def test_fanout_exchange_is_stopped_while_any_destination_is(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    ex = qname("fan")
    broker.channel.exchange_declare(ex, "fanout", auto_delete=True)
    q1 = known(shared_sidecar, broker.declare(qname("fan-a"), {"qpid.flow_stop_count": 3}))
    q2 = known(shared_sidecar, broker.declare(qname("fan-b"), {"qpid.flow_stop_count": 100}))
    broker.channel.queue_bind(q1, ex)
    broker.channel.queue_bind(q2, ex)
    path = f"/flow/exchange/%2F/{quote(ex, safe='')}"
    answer = eventually(lambda: (r := shared_sidecar.get(path)).ok and
                        len(r.json()["destinations"]) == 2 and r.json())
    assert answer["flowStopped"] is False
    broker.publish(q1, 4)
    wait_depth(shared_sidecar, q1, 4)
    answer = eventually(lambda: (a := shared_sidecar.get(path).json())["flowStopped"] and a)
    assert answer["stoppedBy"] == [q1]
    assert {d["queue"] for d in answer["destinations"]} == {q1, q2}
    assert shared_sidecar.get("/flow/exchange/%2F/no-such-exchange").status_code == 404


def test_exchange_long_poll_wakes_on_a_new_binding_to_a_stopped_queue(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    ex = qname("lp-ex")
    broker.channel.exchange_declare(ex, "direct", auto_delete=True)
    calm = known(shared_sidecar, broker.declare(qname("lp-calm")))
    full = known(shared_sidecar, broker.declare(qname("lp-full"), {"qpid.flow_stop_count": 1}))
    broker.channel.queue_bind(calm, ex, "k")
    broker.publish(full, 2)
    assert wait_depth(shared_sidecar, full, 2)["flowStopped"] is True
    path = f"/flow/exchange/%2F/{quote(ex, safe='')}"
    before = eventually(lambda: (r := shared_sidecar.get(path, params={"routing_key": "k"}))
                        .ok and r.json()["destinations"] and r.json())
    assert before["flowStopped"] is False
    woke: dict[str, Any] = {}

    def waiter() -> None:
        r = requests.get(shared_sidecar.url + path, timeout=40, params={
            "routing_key": "k", "since": before["version"], "wait": 20})
        woke["at"], woke["answer"] = time.monotonic(), r.json()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)
    bound_at = time.monotonic()
    broker.channel.queue_bind(full, ex, "k")  # no queue changes: only the bindings do
    thread.join(25)
    assert woke["answer"]["flowStopped"] is True and woke["answer"]["stoppedBy"] == [full]
    assert woke["answer"]["version"] != before["version"]
    assert woke["at"] - bound_at < 5, "re-read within a poll interval, not after the wait"


def test_topic_exchange_routes_by_pattern(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    ex = qname("topic")
    broker.channel.exchange_declare(ex, "topic", auto_delete=True)
    eu = known(shared_sidecar, broker.declare(qname("eu"), {"qpid.flow_stop_count": 1}))
    every = known(shared_sidecar, broker.declare(qname("all")))
    broker.channel.queue_bind(eu, ex, "orders.eu.*")
    broker.channel.queue_bind(every, ex, "orders.#")
    broker.publish(eu, 2)
    wait_depth(shared_sidecar, eu, 2)
    path = f"/flow/exchange/%2F/{quote(ex, safe='')}"

    def answer(key: str) -> dict[str, Any]:
        r = shared_sidecar.get(path, params={"routing_key": key})
        assert r.status_code == 200, r.text
        return r.json()

    eventually(lambda: answer("orders.eu.paris")["flowStopped"])
    assert {d["queue"] for d in answer("orders.eu.paris")["destinations"]} == {eu, every}
    assert answer("orders.us")["flowStopped"] is False
    assert [d["queue"] for d in answer("orders.us")["destinations"]] == [every]
    assert answer("invoices")["destinations"] == []


def test_producers_capacity_and_overflow_risk(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    """The seed's C1/C2 example: stop 100, capacities 50 + 15, max-length 150."""
    q = known(shared_sidecar, broker.declare(qname("prod"), {
        "x-max-length": 150, "x-overflow": "reject-publish", "qpid.flow_stop_count": 100}))
    for producer, capacity in (("C1", "50"), ("C2", "15")):
        r = shared_sidecar.get(flow_path(q), headers={"X-Producer-Id": producer,
                                                      "X-Producer-Capacity": capacity})
        assert r.status_code == 200
    answer = flow(shared_sidecar, q)
    assert (answer["producers"]["active"], answer["producers"]["capacity"]) == (2, 65)
    assert answer["overflowRisk"] is True
    assert "= 165 > max-length 150" in answer["overflowRiskDetail"]
    broker.publish(q, 101)
    wait_depth(shared_sidecar, q, 101)
    r = shared_sidecar.get(flow_path(q), headers={"X-Producer-Id": "C1",
                                                  "X-Producer-Capacity": "50"})
    assert r.json()["flowStopped"] is True
    assert f"[producer(C1)] CHN-1005 : Flow Control Enforced (Queue {q})" in shared_sidecar.log()
    listed = shared_sidecar.get(queue_path(q)).json()["activeProducers"]
    assert [(p["id"], p["capacity"], p["toldStopped"]) for p in listed] == [
        ("C1", 50, True), ("C2", 15, False)]
    assert all(p["lastSeenAt"].endswith("Z") for p in listed)
    broker.drain(q, 101)  # below the resume (= stop 100): C1's next answer lets it go
    wait_depth(shared_sidecar, q, 0, stopped=False)
    r = shared_sidecar.get(flow_path(q), headers={"X-Producer-Id": "C1",
                                                  "X-Producer-Capacity": "50"})
    assert r.json()["flowStopped"] is False
    assert "[producer(C1)] CHN-1006 : Flow Control Removed" in shared_sidecar.log()
    assert "[producer(C2)] CHN-1006" not in shared_sidecar.log()  # C2 was never stopped
    bad = shared_sidecar.get(flow_path(q), headers={"X-Producer-Id": "C3",
                                                    "X-Producer-Capacity": "lots"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == [
        "header", "x-producer-capacity"]
