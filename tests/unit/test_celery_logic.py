"""The Celery integration's logic without a broker: destinations, refusals, which app
sends a message, and install's checks (the real thing: tests/integration/test_celery.py)."""

from __future__ import annotations

import pytest
from celery import Celery

from flow_sidecar_client import FlowStopped
from flow_sidecar_client.celery import Refusal, install
from flow_sidecar_client.flow_gate import Destination


def test_the_default_exchange_names_a_queue_any_other_a_route() -> None:
    assert Destination.of_publish("/", "", "orders") == Destination("/", queue="orders")
    assert Destination.of_publish("v", "amq.default", "q") == Destination("v", queue="q")
    route = Destination.of_publish("/", "shop", "eu.orders")
    assert (route.queue, route.exchange, route.routing_key) == (None, "shop", "eu.orders")
    assert str(route) == "exchange 'shop' routing key 'eu.orders' in vhost '/'"


def test_flow_stopped_names_the_queues() -> None:
    one = FlowStopped("queue 'orders' in vhost '/'", ("orders",))
    assert str(one) == "queue 'orders' in vhost '/' is flow stopped by queue 'orders'; " \
                       "the message was not sent"
    assert "by queues 'a', 'b'" in str(FlowStopped("x", ("a", "b")))
    assert str(FlowStopped("x")) == "x is flow stopped; the message was not sent"


def test_a_refusal_raises_when_kombu_declares_it_and_survives_its_copy() -> None:
    error = FlowStopped("x", ("q",))
    with pytest.raises(FlowStopped) as raised:
        Refusal(error=error).bind(None).declare()  # kombu binds a copy first
    assert raised.value is error


def test_each_app_claims_the_queues_it_routes_to() -> None:
    first, second = Celery("a", set_as_current=False), Celery("b", set_as_current=False)
    controls = [install(app, sidecar_url="http://127.0.0.1:9") for app in (first, second)]
    try:
        mine = first.amqp.queues["q"]  # Celery makes a missing queue, per app
        theirs = second.amqp.queues["q"]
        assert controls[0].claims([mine], {}) and not controls[0].claims([theirs], {})
        assert controls[1].claims([theirs], {}) and not controls[1].claims([mine], {})
        assert controls[0].claims([], {"reply_to": first.thread_oid})
        assert not controls[0].claims([], {"reply_to": second.thread_oid})
    finally:
        for control in controls:
            control.uninstall()


@pytest.mark.parametrize(("options", "named"), [
    ({"mode": "block"}, "mode"), ({"timeout": -1}, "timeout"), ({"capacity": 0}, "capacity"),
    ({"on_unreachable": "drop"}, "on_unreachable"),
    ({"unreachable_grace": -1}, "unreachable_grace")])
def test_install_refuses_bad_settings_by_name(options: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        install(Celery("c", set_as_current=False), **options)  # type: ignore[arg-type]
