"""Broker adapters: the seams between the sidecar and a broker.

Each adapter turns its broker's view of queues into `QueueInfo` records. The poller only
knows the `BrokerAdapter` protocol; tests of the pure core never need a broker at all.
One module per broker (`rabbitmq`, `qpid_cpp`, `broker_j`), chosen by `select`.

A broker whose statistics lag (RabbitMQ refreshes every 5 s) can also offer a
`LiveDepthSource`: the current ready count of a few queues, read from the queues
themselves, which the live sampler asks for the queues close to a crossing. Brokers that
fix flow thresholds when a queue is declared (Qpid C++) also offer `QueueDeclarer`: the
API then writes thresholds by declaring the queue on the broker instead of storing them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

from sidecar.broker.figures import FigureCheck
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import LiveSample, QueueInfo, QueueKey
from sidecar.signals.exchange_routing import Topology

BrokerKind = Literal["rabbitmq", "qpid-cpp", "broker-j"]
# kombu's way: the management URL's scheme names the broker unless --broker does.
SCHEMES: dict[str, BrokerKind] = {
    "http": "rabbitmq", "https": "rabbitmq",
    "amqp": "qpid-cpp", "qpid": "qpid-cpp",
    "broker-j+http": "broker-j", "broker-j+https": "broker-j",
}


def json_int(value: Any) -> int | None:
    """An integer as a broker's JSON gave it, else None (never a boolean: JSON's true is
    no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def kind_of_url(url: str) -> BrokerKind | None:
    """The broker a management URL's scheme stands for; None for an unknown scheme."""
    return SCHEMES.get(urlsplit(url).scheme.lower())


class BrokerError(Exception):
    """The broker could not be read (down, slow, refused credentials, bad answer)."""


class SlowAnswer(BrokerError):
    """No answer came in time, or it broke off, or the servers gave up (5xx): unlike a
    refused connection, what a request too large for the broker looks like."""


class BrokerRefused(BrokerError):
    """The broker answered and refused the request; the text is the broker's."""


class QueueExists(BrokerRefused):
    """The queue to declare exists already (its thresholds stay as they are)."""


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


@dataclass(frozen=True)
class LiveBatch:
    """What one `LiveDepthSource.sample` call read. `error` says why some or all of the
    queues asked for were not read (no connection, refused); None when all were."""

    samples: list[LiveSample] = field(default_factory=list)
    error: str | None = None


class LiveDepthSource(Protocol):
    """Live depth of named queues. Blocking: the live sampler calls it from a thread of its
    own, one call at a time, and never from the event loop."""

    def sample(self, keys: Sequence[QueueKey]) -> LiveBatch:
        """Read the ready count of each queue now. Never raises for a broker that is down
        or refuses: those queues are left out and `error` says why; the source reconnects
        by itself, with backoff. Called with no keys, it only keeps its connection alive
        (and opens it when it can), so that its health is known while nothing is hot."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class QueueDeclarer(Protocol):
    """A broker whose flow thresholds are declare arguments, fixed from then on."""

    def declare_queue(self, vhost: str, name: str, values: Mapping[str, int]) -> None:
        """Create the queue with these `qpid.flow_*` arguments; BrokerRefused (with the
        broker's words) when it refuses them, BrokerError when it cannot be asked."""
        ...


@runtime_checkable
class ChecksFigures(Protocol):
    """An adapter that vets the depth figures it reads (`sidecar.broker.figures`)."""

    figures: FigureCheck


@runtime_checkable
class ReportsVhostQuotas(Protocol):
    """A broker that enforces a quota per virtual host itself (Broker-J's store overfull and
    underfull sizes)."""

    def vhost_quotas(self) -> dict[str, dict[str, int]]:
        """Each vhost's quota by the API's names (`overfullSize`, `underfullSize`), as read
        with the last `fetch_queues`; vhosts without one are left out."""
        ...
