"""The value types every part of the sidecar passes around: a queue's key, one broker
sample of a queue (from the statistics or read live), and one change of what producers
are told.

They live here, not in the module that first made them, so that the flow rules, the
signals to producers, the records and the HTTP layer can share them without importing
each other. Frozen dataclasses and aliases only: no behaviour, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.state_machine import FlowEvent
from sidecar.flow.thresholds import Resolution

QueueKey = tuple[str, str]  # (vhost, queue name)


@dataclass(frozen=True)
class BrokerFlow:
    """Flow control a broker enforces itself (Qpid C++, Broker-J), as it reports it: its
    own flowStopped and flowStoppedCount (None for a broker that keeps no counter: the
    sidecar then counts the changes it sees), and the thresholds it applies, resolved by
    the adapter with that broker's rules."""

    stopped: bool
    stopped_count: int | None
    resolution: Resolution


@dataclass(frozen=True)
class QueueInfo:
    """One queue as the broker reports it in one statistics poll.

    `messages`/`bytes` are None while the broker has no statistics for the queue yet
    (RabbitMQ omits them until its first stats emission): such a queue is known but has
    no depth sample, so its flow state must not move.

    `limits` is set by adapters that read a queue's maxima themselves (Qpid's
    `qpid.max_count`); None means RabbitMQ's arguments and policy say them. `broker_flow`
    is set when the broker enforces flow control itself: the sidecar then reports the
    broker's state instead of running its own machine.
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
    unacked: int | None = None  # delivered, not yet acknowledged (part of `messages`)
    # the consumers the broker listed for the queue, and the sum of the prefetch windows
    # of those that must acknowledge (None: not listed, or some window is unlimited):
    # with `unacked`, an upper bound of what a live ready count leaves out
    consumers: int | None = None
    unacked_limit: int | None = None
    limits: QueueLimits | None = None
    broker_flow: BrokerFlow | None = None


@dataclass(frozen=True)
class LiveSample:
    """A queue's ready count read from the queue itself, between statistics polls.

    `ready` is None when the queue cannot be read live: the broker says it does not exist
    (deleted since the last poll; polls, not live samples, decide that a queue is gone)
    or refuses to tell. `at` is the moment it describes, taken before the request was
    sent; `took` how long the answer took; `consumers` the consumer count the queue
    answered with (None: not told).
    """

    vhost: str
    name: str
    ready: int | None
    at: float
    consumers: int | None = None
    took: float = 0.0

    @property
    def key(self) -> QueueKey:
        return (self.vhost, self.name)


@dataclass(frozen=True)
class Change:
    """What producers are told about a queue changed: a transition, staleness under
    `--on-stale stop|go`, a stopped queue deleted, or a broker-wide reason (its vhost's
    quota, a broker alarm) starting or ending; `stopped_by` says what stops it now."""

    vhost: str
    queue: str
    version: int
    flow_stopped: bool
    event: FlowEvent | None = None
    reason: str = ""
    stopped_count: int = 0  # flowStoppedCount as of this change
    stopped_by: tuple[str, ...] = ()  # flowStoppedBy: "queue", "stale", "vhost-quota", ...
