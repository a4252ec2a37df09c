"""Webhooks end to end: a real sidecar process, the real RabbitMQ, a real receiver on
127.0.0.1. Transitions arrive signed, in order, once per id, across receiver outages and
`kill -9`; 410 disables; secrets never come back out."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
import requests

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import Received, WebhookReceiver

Names = Callable[[str], str]
TOKEN = "webhook-test-token"
SECRET = "whsec_c2lkZWNhci10ZXN0LXNlY3JldC1rZXktMzItYnl0ZXMh"  # base64 of a 32-byte key
THRESHOLDS: dict[str, object] = {"qpid.flow_stop_count": 3, "qpid.flow_resume_count": 2}
FAST_RETRY = ("--poll-interval", "0.2", "--token", TOKEN, "--webhook-allow-private",
              "--webhook-backoff-base", "0.1", "--webhook-backoff-max", "0.5")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET).start()
    yield made
    made.stop()


def post(sidecar: SidecarProcess, path: str, body: object = None,
         token: str | None = TOKEN) -> requests.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return sidecar.http.post(sidecar.url + path, json=body, headers=headers, timeout=10)


def subscribe(sidecar: SidecarProcess, receiver: WebhookReceiver, queue: str) -> str:
    r = post(sidecar, "/webhooks", {"url": receiver.url, "secret": SECRET, "queue": queue})
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/webhooks/{r.json()['id']}"
    sub_id: str = r.json()["id"]
    return sub_id


def deliveries(sidecar: SidecarProcess, sub_id: str) -> list[dict[str, Any]]:
    r = sidecar.get(f"/webhooks/{sub_id}/deliveries",
                    headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    rows: list[dict[str, Any]] = r.json()
    return rows


def arrived(receiver: WebhookReceiver, count: int) -> list[Received]:
    """Wait until `count` distinct events were accepted; return the first arrival of each."""
    def firsts() -> list[Received]:
        seen: dict[str, Received] = {}
        for r in receiver.events():
            seen.setdefault(r.webhook_id, r)
        return list(seen.values())
    got: list[Received] = eventually(lambda: len(f := firsts()) >= count and f, timeout=20)
    return got


def assert_one_id_per_sequence_in_order(receiver: WebhookReceiver, queue: str,
                                        count: int) -> None:
    """Sequences 1..count, each under a single webhook-id (repeats only as redeliveries of
    the same id), first arrivals in sequence order, all validly signed."""
    mine = [r for r in receiver.received if r.event["data"]["queue"] == queue]
    assert all(r.valid for r in mine)
    ids: dict[int, set[str]] = {}
    for r in mine:
        ids.setdefault(r.event["data"]["sequence"], set()).add(r.webhook_id)
    assert sorted(ids) == list(range(1, count + 1))
    assert all(len(v) == 1 for v in ids.values()), ids
    firsts = [r.event["data"]["sequence"] for r in arrived(receiver, count)]
    assert firsts == list(range(1, count + 1))


def transition(sidecar: SidecarProcess, broker: Broker, queue: str, publish: int = 0,
               drain: int = 0, depth: int = 0, stopped: bool | None = None) -> dict[str, Any]:
    """Move the queue's depth and wait until the sidecar has seen it (and, with `stopped`,
    that state: a resume waits for an upper bound of the depth)."""
    broker.publish(queue, publish)
    broker.drain(queue, drain)
    return wait_depth(sidecar, queue, depth, stopped=stopped)


def test_transitions_arrive_signed_in_order_and_fast(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names,
    receiver: WebhookReceiver
) -> None:
    sidecar = sidecar_factory(*FAST_RETRY).start()
    r = post(sidecar, "/webhooks", {"url": receiver.url, "secret": SECRET}, token=None)
    assert r.status_code == 401
    q = qname("hooked")
    sub_id = subscribe(sidecar, receiver, q)
    known(sidecar, broker.declare(q, THRESHOLDS))

    assert transition(sidecar, broker, q, publish=4, depth=4)["flowStopped"] is True
    transition(sidecar, broker, q, drain=3, depth=1, stopped=False)
    assert transition(sidecar, broker, q, publish=4, depth=5)["flowStopped"] is True

    events = arrived(receiver, 3)
    assert [e.event["type"] for e in events] == ["flow.stopped", "flow.resumed", "flow.stopped"]
    data = [e.event["data"] for e in events]
    assert [d["sequence"] for d in data] == [1, 2, 3]
    assert [d["flowStoppedCount"] for d in data] == [1, 1, 2]
    assert [d["depth"]["messages"] for d in data] == [4, 1, 5]
    assert data[0]["thresholds"]["qpid.flow_stop_count"] == 3
    assert all(d["vhost"] == "/" and d["queue"] == q for d in data)
    assert all(e.valid for e in receiver.received)
    assert data[0]["version"] < data[1]["version"] < data[2]["version"]

    delays = [e.received_at - datetime.fromisoformat(e.event["timestamp"]).timestamp()
              for e in events]
    print(f"\nwebhook delivery delay after a transition: mean {statistics.mean(delays)*1000:.1f}"
          f" ms, max {max(delays)*1000:.1f} ms over {len(delays)} events")
    assert max(delays) < 1.0
    assert all(abs(e.received_at - e.timestamp) < 2 for e in events)

    rows = deliveries(sidecar, sub_id)
    assert [(d["sequence"], d["status"], d["attempts"], d["lastStatus"]) for d in rows] == [
        (3, "delivered", 1, 204), (2, "delivered", 1, 204), (1, "delivered", 1, 204)]
    assert [d["webhookId"] for d in reversed(rows)] == [e.webhook_id for e in events]
    listed = sidecar.get("/webhooks")
    assert listed.status_code == 200
    assert [w["id"] for w in listed.json() if w["id"] == sub_id] == [sub_id]
    assert SECRET not in listed.text and SECRET not in sidecar.get(f"/webhooks/{sub_id}").text
    assert SECRET not in sidecar.log()


def test_receiver_outage_and_kill_9_lose_nothing(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names,
    receiver: WebhookReceiver
) -> None:
    sidecar = sidecar_factory(*FAST_RETRY).start()
    q = qname("outage")
    sub_id = subscribe(sidecar, receiver, q)
    known(sidecar, broker.declare(q, THRESHOLDS))
    transition(sidecar, broker, q, publish=4, depth=4)
    arrived(receiver, 1)

    receiver.stop()
    transition(sidecar, broker, q, drain=3, depth=1, stopped=False)
    assert transition(sidecar, broker, q, publish=4, depth=5)["flowStopped"] is True
    failing = eventually(lambda: (rows := deliveries(sidecar, sub_id))[-2]["attempts"] >= 2
                         and rows)
    assert failing[-2]["status"] == "pending" and failing[-2]["lastError"]
    assert failing[-2]["nextAttemptAt"] is not None
    assert failing[0]["attempts"] == 0, "the stream's later event waits for the earlier one"

    sidecar.kill()
    broker.drain(q, 4)  # resumes while the sidecar is down: noticed after the restart
    sidecar.start()
    wait_depth(sidecar, q, 1, stopped=False)
    assert len(deliveries(sidecar, sub_id)) == 4
    receiver.start()  # same port, as a restarted receiver

    arrived(receiver, 4)
    assert_one_id_per_sequence_in_order(receiver, q, 4)
    assert [e.event["type"] for e in arrived(receiver, 4)] == [
        "flow.stopped", "flow.resumed", "flow.stopped", "flow.resumed"]
    def all_delivered() -> list[dict[str, Any]] | None:
        rows = deliveries(sidecar, sub_id)
        return rows if {d["status"] for d in rows} == {"delivered"} else None
    assert eventually(all_delivered)[-2]["attempts"] >= 3


def test_410_disables_the_subscription_until_enabled(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names,
    receiver: WebhookReceiver
) -> None:
    receiver.status = 410
    sidecar = sidecar_factory(*FAST_RETRY).start()
    q = qname("gone")
    sub_id = subscribe(sidecar, receiver, q)
    known(sidecar, broker.declare(q, THRESHOLDS))
    transition(sidecar, broker, q, publish=4, depth=4)

    gone = eventually(lambda: not (w := sidecar.get(f"/webhooks/{sub_id}").json())["enabled"]
                      and w)
    assert "410" in gone["disabledReason"] and gone["deliveries"]["pending"] == 1
    # committed with its (absent) events
    transition(sidecar, broker, q, drain=3, depth=1, stopped=False)
    [row] = deliveries(sidecar, sub_id)
    assert (row["sequence"], row["status"], row["lastStatus"]) == (1, "pending", 410)
    assert [r.answered for r in receiver.received] == [410]

    receiver.status = 200
    enabled = post(sidecar, f"/webhooks/{sub_id}/enable")
    assert enabled.status_code == 200 and enabled.json()["enabled"] is True
    [event] = arrived(receiver, 1)
    assert event.webhook_id == receiver.received[0].webhook_id == row["webhookId"]
    assert event.event["data"]["sequence"] == 1


@pytest.mark.parametrize(("body", "field"), [
    ({"url": "ftp://127.0.0.1/x", "secret": "s3cret-value"}, "url"),
    ({"url": "127.0.0.1:8080/hook", "secret": "s3cret-value"}, "url"),
    ({"url": "http://", "secret": "s3cret-value"}, "url"),
    ({"url": "http://127.0.0.1:99999/", "secret": "s3cret-value"}, "url"),
    ({"url": "javascript:alert(1)", "secret": "s3cret-value"}, "url"),
    ({"url": "http://127.0.0.1:9/"}, "secret"),
    ({"url": "http://127.0.0.1:9/", "secret": ""}, "secret"),
    ({"url": "http://127.0.0.1:9/", "secret": "whsec_!!not-base64!!"}, "secret"),
    ({"url": "http://127.0.0.1:9/", "secret": "s3cret-value", "queues": "x"}, "queues"),
])
def test_bad_subscriptions_are_422_naming_the_field(
    shared_sidecar: SidecarProcess, body: dict[str, str], field: str
) -> None:
    r = post(shared_sidecar, "/webhooks", body, token=None)
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", field]]
    if body.get("secret"):
        assert body["secret"] not in r.text


def test_subscription_lifecycle_never_shows_the_secret(shared_sidecar: SidecarProcess) -> None:
    secret = "never-echoed-" + "x" * 20
    missing_url = post(shared_sidecar, "/webhooks", {"secret": secret}, token=None)
    assert missing_url.status_code == 422 and secret not in missing_url.text
    r = post(shared_sidecar, "/webhooks", {"url": "http://127.0.0.1:9/h", "secret": secret,
                                           "queue": "no-such-queue-*", "vhost": "/"}, token=None)
    assert r.status_code == 201
    sub = r.json()
    assert (sub["url"], sub["queue"], sub["vhost"], sub["enabled"]) == (
        "http://127.0.0.1:9/h", "no-such-queue-*", "/", True)
    for path in ("/webhooks", f"/webhooks/{sub['id']}", f"/webhooks/{sub['id']}/deliveries"):
        got = shared_sidecar.get(path)
        assert got.status_code == 200 and secret not in got.text
    assert shared_sidecar.delete(f"/webhooks/{sub['id']}").status_code == 204
    assert shared_sidecar.get(f"/webhooks/{sub['id']}").status_code == 404
    assert shared_sidecar.delete(f"/webhooks/{sub['id']}").status_code == 404
    assert secret not in shared_sidecar.log()


def test_slow_receivers_slow_neither_the_poller_nor_flow(
    broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names
) -> None:
    """Eight deliveries held 10 s each (the default --webhook-concurrency) must not hold up
    the broker reads: a crossing on another queue still reaches /flow at the usual pace.
    (Sharing asyncio's default pool, 6 threads on 2 cores, six of them stalled the poll.)"""
    slow = WebhookReceiver(SECRET, delay=10.0).start()
    try:
        sidecar = sidecar_factory(*FAST_RETRY, "--webhook-timeout", "15").start()
        tag = qname("slow")
        queues = [known(sidecar, broker.declare(f"{tag}-{i}", THRESHOLDS)) for i in range(8)]
        subscribe(sidecar, slow, f"{tag}-*")
        probe = known(sidecar, broker.declare(qname("probe"), THRESHOLDS))
        for q in queues:
            broker.publish(q, 4)  # each stops: eight streams want to deliver at once
        eventually(lambda: len(slow.received) >= 6, timeout=8)
        crossed_at = time.monotonic()
        broker.publish(probe, 4)
        assert wait_depth(sidecar, probe, 4)["flowStopped"] is True
        seen_after = time.monotonic() - crossed_at
        started = time.monotonic()
        assert sidecar.get(f"/flow/{probe}").status_code == 200
        answered_in = time.monotonic() - started
        held = [r for r in slow.received if time.time() - r.received_at < slow.delay]
        print(f"with {len(held)} deliveries held for 10 s: crossing seen after "
              f"{seen_after:.2f} s, /flow answered in {answered_in * 1000:.1f} ms")
        assert len(held) >= 6, "the slow deliveries were still in flight"
        assert seen_after < 4 and answered_in < 0.5
    finally:
        slow.stop()
