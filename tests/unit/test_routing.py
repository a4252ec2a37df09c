"""Exchange routing as RabbitMQ does it, resolved conservatively."""

from __future__ import annotations

import pytest

from sidecar.signals.exchange_routing import (
    Binding,
    Topology,
    alternate_of,
    destinations,
    topic_matches,
)


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("orders.*", "orders.eu", True),
        ("orders.*", "orders.eu.paris", False),
        ("orders.*", "orders", False),
        ("orders.#", "orders", True),
        ("orders.#", "orders.eu.paris", True),
        ("#", "", True),
        ("#", "anything.at.all", True),
        ("*.eu.*", "orders.eu.paris", True),
        ("*.eu.*", "eu.paris", False),
        ("#.paris", "orders.eu.paris", True),
        ("a.#.z", "a.z", True),
        ("a.#.z", "a.b.c.z", True),
        ("a.#.z", "a.b.c", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
        # an empty key is zero words (checked against RabbitMQ 3.10)
        ("*", "", False),
        ("", "", True),
        ("#.#", "", True),
        ("a.*", "a.", True),
        ("*", "a.", False),
    ],
)
def test_topic_matches(pattern: str, key: str, matches: bool) -> None:
    assert topic_matches(pattern, key) is matches


def b(source: str, destination: str, key: str = "", kind: str = "queue") -> Binding:
    return Binding("/", source, destination, kind, key)


TOPOLOGY = Topology.build(
    {("/", "fan"): "fanout", ("/", "direct"): "direct", ("/", "topic"): "topic",
     ("/", "headers"): "headers", ("/", "e2e"): "direct", ("/", "loop"): "fanout"},
    [b("fan", "q1"), b("fan", "q2"),
     b("direct", "d1", "red"), b("direct", "d2", "blue"),
     b("topic", "t-eu", "orders.eu.*"), b("topic", "t-all", "orders.#"),
     b("headers", "h1", "ignored"), b("headers", "h2"),
     b("e2e", "fan", "go", "exchange"), b("e2e", "d3", "go"),
     b("loop", "loop", "", "exchange"), b("loop", "l1")],
)


@pytest.mark.parametrize(
    ("exchange", "key", "queues"),
    [
        ("fan", "whatever", {"q1", "q2"}),
        ("direct", "red", {"d1"}),
        ("direct", "green", set()),
        ("topic", "orders.eu.paris", {"t-eu", "t-all"}),
        ("topic", "orders.us", {"t-all"}),
        ("headers", "x", {"h1", "h2"}),  # conservatively every bound queue
        ("e2e", "go", {"q1", "q2", "d3"}),  # exchange-to-exchange followed
        ("e2e", "stop", set()),
        ("loop", "", {"l1"}),  # a cycle terminates
        ("", "orders", {"orders"}),  # the default exchange
        ("amq.default", "orders", {"orders"}),
    ],
)
def test_destinations(exchange: str, key: str, queues: set[str]) -> None:
    assert destinations(TOPOLOGY, "/", exchange, key) == queues


def test_unknown_exchange() -> None:
    assert destinations(TOPOLOGY, "/", "nope", "k") is None
    assert destinations(TOPOLOGY, "other-vhost", "fan", "k") is None


ALTERNATES = Topology.build(
    {("/", "x"): "direct", ("/", "ae"): "fanout", ("/", "ae2"): "topic",
     ("/", "to-e"): "direct", ("/", "empty-e"): "direct", ("/", "h"): "headers",
     ("/", "ping"): "direct", ("/", "pong"): "direct", ("/", "gone"): "direct"},
    [b("x", "bound", "k"), b("ae", "caught"), b("ae2", "caught-eu", "eu.#"),
     b("to-e", "empty-e", "k", "exchange"), b("h", "h1")],
    {("/", "x"): "ae", ("/", "ae"): "ae2", ("/", "to-e"): "ae", ("/", "empty-e"): "ae",
     ("/", "h"): "ae", ("/", "ping"): "pong", ("/", "pong"): "ping",
     ("/", "gone"): "no-such-exchange"},
)


@pytest.mark.parametrize(
    ("exchange", "key", "queues"),
    [
        ("x", "k", {"bound"}),  # routed: the alternate is not used
        ("x", "other", {"caught"}),  # routed nowhere: the alternate exchange takes it
        ("ae2", "eu.x", {"caught-eu"}),
        # an alternate's own alternate, when the alternate routes nowhere either (a fanout
        # with bindings always routes, so ae never hands over)
        ("x", "eu.x", {"caught"}),
        # an exchange destination counts as routed (as in rabbit_exchange:route); the
        # bound exchange that routes nowhere uses its own alternate
        ("to-e", "k", {"caught"}),
        ("h", "whatever", {"h1", "caught"}),  # headers: conservatively both
        ("ping", "k", set()),  # a cycle of alternates ends
        ("gone", "k", set()),  # an alternate that does not exist: nowhere, as the broker
    ],
)
def test_alternate_exchanges(exchange: str, key: str, queues: set[str]) -> None:
    assert destinations(ALTERNATES, "/", exchange, key) == queues


@pytest.mark.parametrize(
    ("arguments", "policy", "alternate"),
    [
        ({}, {}, None),
        ({"alternate-exchange": "a"}, {}, "a"),
        ({}, {"alternate-exchange": "p"}, "p"),
        ({"alternate-exchange": "a"}, {"alternate-exchange": "p"}, "a"),  # argument wins
        ({"alternate-exchange": 5}, {"alternate-exchange": "p"}, "p"),
    ],
)
def test_alternate_of(arguments: dict[str, object], policy: dict[str, object],
                      alternate: str | None) -> None:
    assert alternate_of(arguments, policy) == alternate
