"""The webhook target policy where it matters: on the connection actually made. A real
receiver on 127.0.0.1 stands for an internal service; a name that resolves to it stands
for a name whose DNS answer changed after the subscription was made."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import pytest

from sidecar.signals.webhook_signing import signature_headers
from sidecar.signals.webhook_targets import TargetPolicy, TargetRefused, checked_transport
from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import WebhookReceiver

SECRET = "internal-service-secret"
TOKEN = "target-test-token"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET).start()
    yield made
    made.stop()


def signed(body: bytes) -> dict[str, str]:
    return signature_headers(SECRET, "msg_test", 1_767_225_600, body)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_transport_refuses_loopback_unless_allowed(receiver: WebhookReceiver,
                                                       host: str) -> None:
    url = f"http://{host}:{receiver.port}/hooks/flow"
    body = json.dumps({"type": "flow.stopped", "data": {}}).encode()
    with pytest.raises(TargetRefused, match="--webhook-allow-private"):
        checked_transport(TargetPolicy())(url, body, signed(body), 5.0)
    assert receiver.received == [], "refused before a byte was sent"
    assert checked_transport(TargetPolicy(allow_private=True))(url, body, signed(body),
                                                               5.0) == 204
    assert len(receiver.received) == 1


def loopback_name() -> str:
    """A name other than localhost that resolves to loopback here, as a rebinding name
    would (the host's own name usually does, through /etc/hosts)."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except OSError:
        addresses = set()
    if name in ("localhost", "") or not addresses or not all(
            a.startswith("127.") or a == "::1" for a in addresses):
        pytest.skip(f"this host's name {name!r} does not resolve to loopback only")
    return name


def test_a_name_resolving_to_an_internal_address_is_refused_at_delivery(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess],
        qname: Callable[[str], str], receiver: WebhookReceiver) -> None:
    name = loopback_name()
    sidecar = sidecar_factory("--poll-interval", "0.2", "--token", TOKEN,
                              "--webhook-backoff-base", "0.1").start()
    auth = {"authorization": f"Bearer {TOKEN}"}
    q = qname("rebound")
    r = sidecar.http.post(sidecar.url + "/webhooks", headers=auth, timeout=10, json={
        "url": f"http://{name}:{receiver.port}/hooks/flow", "secret": SECRET, "queue": q})
    assert r.status_code == 201, r.text  # a name: judged when connecting
    known(sidecar, broker.declare(q, {"qpid.flow_stop_count": 1}))
    broker.publish(q, 2)
    assert wait_depth(sidecar, q, 2)["flowStopped"] is True

    def refused_twice() -> dict[str, object] | None:
        [row] = sidecar.get(f"/webhooks/{r.json()['id']}/deliveries", headers=auth).json()
        return row if row["attempts"] >= 2 else None

    row = eventually(refused_twice)
    assert row["status"] == "pending"
    assert "refused by the webhook target policy" in str(row["lastError"])
    assert receiver.received == []
    assert "refused by the webhook target policy" in sidecar.log()
