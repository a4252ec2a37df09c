"""Exchange flow where the broker routes beyond plain bindings: alternate exchanges (set
by argument or by policy) and the default exchange by its real name, "", for real."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]


def exchange_flow(sidecar: SidecarProcess, exchange: str, key: str) -> dict[str, Any]:
    r = sidecar.get(f"/flow/exchange/%2F/{quote(exchange, safe='')}",
                    params={"routing_key": key})
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize("set_by", ["argument", "policy"])
def test_a_message_nothing_binds_goes_to_the_alternate_exchange(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names, set_by: str
) -> None:
    ae, ex = qname("ae"), qname("with-ae")
    broker.created_exchanges.extend([ae, ex])  # deleted by broker.cleanup()
    broker.channel.exchange_declare(ae, "fanout")
    if set_by == "argument":
        broker.channel.exchange_declare(ex, "direct", arguments={"alternate-exchange": ae})
    else:
        broker.channel.exchange_declare(ex, "direct")
        r = broker.api("PUT", f"/api/policies/%2F/{quote(ex, safe='')}", json={
            "pattern": f"^{ex}$", "definition": {"alternate-exchange": ae},
            "apply-to": "exchanges", "priority": 10})
        assert r.status_code in (201, 204), r.text
        broker.created_policies.append(("/", ex))
    bound = known(shared_sidecar, broker.declare(qname("bound")))
    caught = known(shared_sidecar, broker.declare(qname("caught"),
                                                  {"qpid.flow_stop_count": 1}))
    broker.channel.queue_bind(bound, ex, "k")
    broker.channel.queue_bind(caught, ae)
    broker.publish(caught, 1)

    # what the broker does: an unmatched key lands in the alternate exchange's queue
    broker.channel.basic_publish(ex, "no-binding", b"probe")
    assert wait_depth(shared_sidecar, caught, 2)["flowStopped"] is True
    answer = eventually(lambda: (a := exchange_flow(shared_sidecar, ex, "no-binding"))
                        ["flowStopped"] and a)
    assert answer["stoppedBy"] == [caught]
    assert [d["queue"] for d in answer["destinations"]] == [caught]
    # a key that is bound is routed there, and the alternate exchange is not used
    routed = exchange_flow(shared_sidecar, ex, "k")
    assert routed["flowStopped"] is False
    assert [d["queue"] for d in routed["destinations"]] == [bound]


def test_the_default_exchange_by_its_empty_name(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names
) -> None:
    """`/flow/exchange/%2F/` names the default exchange (""), like `amq.default`."""
    q = known(shared_sidecar, broker.declare(qname("dflt-ex"), {"qpid.flow_stop_count": 1}))
    broker.publish(q, 2)
    wait_depth(shared_sidecar, q, 2)
    r = shared_sidecar.get("/flow/exchange/%2F/", params={"routing_key": q},
                           allow_redirects=False)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["exchange"] == "" and answer["flowStopped"] is True
    assert answer["stoppedBy"] == [q]
    by_name = shared_sidecar.get("/flow/exchange/%2F/amq.default", params={"routing_key": q})
    assert by_name.json()["stoppedBy"] == [q]
