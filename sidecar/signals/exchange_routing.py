"""Which queues a message published to an exchange reaches, from the broker's bindings.

Qpid completes a transfer only when flow is off for every destination queue of the
message, so a producer publishing through an exchange must be stopped while any queue the
routing key reaches is stopped. This resolves AMQP 0-9-1 routing the way RabbitMQ does:
the default exchange routes to the queue named by the key, direct matches keys exactly,
fanout ignores them, topic matches `*` (one word) and `#` (zero or more words), and
exchange-to-exchange bindings are followed. Headers exchanges (and unknown types) are
resolved conservatively to every bound destination: we never under-report. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

DEFAULT_EXCHANGE_NAMES = ("", "amq.default")


@dataclass(frozen=True)
class Binding:
    """One binding of an exchange (`source`) to a queue or another exchange."""

    vhost: str
    source: str
    destination: str
    destination_type: str
    routing_key: str


@dataclass(frozen=True)
class Topology:
    """Exchanges (with their types) and bindings of the broker, per vhost."""

    exchanges: dict[tuple[str, str], str] = field(default_factory=dict)
    bindings: dict[tuple[str, str], tuple[Binding, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, exchanges: dict[tuple[str, str], str],
              bindings: Iterable[Binding]) -> Topology:
        by_source: dict[tuple[str, str], list[Binding]] = {}
        for b in bindings:
            by_source.setdefault((b.vhost, b.source), []).append(b)
        return cls(exchanges, {k: tuple(v) for k, v in by_source.items()})


@lru_cache(maxsize=4096)
def topic_matches(pattern: str, routing_key: str) -> bool:
    """AMQP topic matching: words split on '.', '*' is one word, '#' zero or more. An empty
    key or pattern is zero words, as RabbitMQ splits it: '*' does not match the key ''."""
    words = routing_key.split(".") if routing_key else []
    parts = pattern.split(".") if pattern else []

    @lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if j == len(parts):
            return i == len(words)
        if parts[j] == "#":
            return any(match(k, j + 1) for k in range(i, len(words) + 1))
        if i == len(words):
            return False
        return (parts[j] == "*" or parts[j] == words[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _binding_matches(exchange_type: str, binding: Binding, routing_key: str) -> bool:
    if exchange_type == "direct":
        return binding.routing_key == routing_key
    if exchange_type == "topic":
        return topic_matches(binding.routing_key, routing_key)
    return True  # fanout; headers and unknown types conservatively


def destinations(topology: Topology, vhost: str, exchange: str,
                 routing_key: str) -> set[str] | None:
    """Names of the queues (in `vhost`) a message reaches; None if the exchange is unknown."""
    if exchange in DEFAULT_EXCHANGE_NAMES:
        return {routing_key}
    if (vhost, exchange) not in topology.exchanges:
        return None
    queues: set[str] = set()
    seen: set[str] = set()
    pending = [exchange]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        kind = topology.exchanges.get((vhost, name), "fanout")
        for binding in topology.bindings.get((vhost, name), ()):
            if not _binding_matches(kind, binding, routing_key):
                continue
            if binding.destination_type == "exchange":
                pending.append(binding.destination)
            else:
                queues.add(binding.destination)
    return queues
