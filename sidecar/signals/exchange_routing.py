"""Which queues a message published to an exchange reaches, from the broker's bindings.

Qpid completes a transfer only when flow is off for every destination queue of the
message, so a producer publishing through an exchange must be stopped while any queue the
routing key reaches is stopped. This resolves AMQP 0-9-1 routing the way RabbitMQ does:
the default exchange routes to the queue named by the key, direct matches keys exactly,
fanout ignores them, topic matches `*` (one word) and `#` (zero or more words), and
exchange-to-exchange bindings are followed. An exchange that routes the message nowhere
hands it to its alternate exchange (argument `alternate-exchange`, else the key of the
same name in its policy), as `rabbit_exchange:route` does; every exchange is visited once,
so cycles of bindings and alternates end. Headers exchanges (and unknown types) are
resolved conservatively to every bound destination and their alternate exchange: we never
under-report. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

DEFAULT_EXCHANGE_NAMES = ("", "amq.default")
ALTERNATE_EXCHANGE = "alternate-exchange"  # the argument and the policy key
#: types whose bindings we match exactly; for any other a message may match none
_MATCHED_EXACTLY = ("direct", "fanout", "topic")


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
    """Exchanges (with their types), bindings and alternate exchanges, per vhost."""

    exchanges: dict[tuple[str, str], str] = field(default_factory=dict)
    bindings: dict[tuple[str, str], tuple[Binding, ...]] = field(default_factory=dict)
    alternates: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def build(cls, exchanges: dict[tuple[str, str], str], bindings: Iterable[Binding],
              alternates: dict[tuple[str, str], str] | None = None) -> Topology:
        by_source: dict[tuple[str, str], list[Binding]] = {}
        for b in bindings:
            by_source.setdefault((b.vhost, b.source), []).append(b)
        return cls(exchanges, {k: tuple(v) for k, v in by_source.items()}, alternates or {})


def alternate_of(arguments: Mapping[str, object],
                 policy_definition: Mapping[str, object]) -> str | None:
    """An exchange's alternate exchange: its argument wins over its policy's key, as in
    `rabbit_policy:get_arg/3`; a value that is not a name is ignored, as the broker does."""
    for source in (arguments, policy_definition):
        value = source.get(ALTERNATE_EXCHANGE)
        if isinstance(value, str):
            return value
    return None


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
        matched = False
        for binding in topology.bindings.get((vhost, name), ()):
            if not _binding_matches(kind, binding, routing_key):
                continue
            matched = True
            if binding.destination_type == "exchange":
                pending.append(binding.destination)
            else:
                queues.add(binding.destination)
        alternate = topology.alternates.get((vhost, name))
        if alternate is not None and (not matched or kind not in _MATCHED_EXACTLY):
            pending.append(alternate)
    return queues
