"""Broker adapters: the one seam between the sidecar and a broker's management interface.

Each adapter turns its broker's view of queues into `QueueInfo` records. The poller only
knows the `BrokerAdapter` protocol, so a Qpid adapter can be added next to the RabbitMQ
one without touching flow logic; tests of the pure core never need a broker at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sidecar.routing import Topology


class BrokerError(Exception):
    """The broker could not be read (down, slow, refused credentials, bad answer)."""


@dataclass(frozen=True)
class QueueInfo:
    """One queue as the broker reports it in one poll.

    `messages`/`bytes` are None while the broker has no statistics for the queue yet
    (RabbitMQ omits them until its first stats emission): such a queue is known but has
    no depth sample, so its flow state must not move.
    """

    vhost: str
    name: str
    messages: int | None
    bytes: int | None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    policy: Mapping[str, Any] = field(default_factory=dict)
    queue_type: str = "classic"
    publish_rate: float | None = None
    deliver_rate: float | None = None


class BrokerAdapter(Protocol):
    """What the poller needs from a broker."""

    def fetch_queues(self) -> list[QueueInfo]:
        """Every queue with its depth; raises BrokerError when that cannot be had."""
        ...

    def fetch_topology(self) -> Topology:
        """Exchanges and bindings, for flow through an exchange; raises BrokerError."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
