"""Broker adapters: the one seam between the sidecar and a broker's management interface.

Each adapter turns its broker's view of queues into `QueueInfo` records. The poller only
knows the `BrokerAdapter` protocol, so a Qpid adapter can be added next to the RabbitMQ
one without touching flow logic; tests of the pure core never need a broker at all.
"""

from __future__ import annotations

from typing import Protocol

from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueInfo
from sidecar.signals.exchange_routing import Topology


class BrokerError(Exception):
    """The broker could not be read (down, slow, refused credentials, bad answer)."""


class BrokerAdapter(Protocol):
    """What the poller needs from a broker."""

    def fetch_queues(self) -> list[QueueInfo]:
        """Every queue with its depth; raises BrokerError when that cannot be had."""
        ...

    def fetch_topology(self) -> Topology:
        """Exchanges and bindings, for flow through an exchange; raises BrokerError."""
        ...

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        """Each node's memory and disk alarm flags; raises BrokerError."""
        ...

    def fetch_vhosts(self) -> set[str]:
        """The names of every virtual host; raises BrokerError."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
