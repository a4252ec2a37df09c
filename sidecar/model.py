"""The value types every part of the sidecar passes around: a queue's key, one broker
sample of a queue (from the statistics or read live), one change of what producers are
told, and the flow rules' values they carry: a queue's limits, its resolved thresholds and
their sources, a depth, a transition.

They live here, not in the modules that compute them (the flow rules in sidecar/flow
re-export the ones they make), so that the flow rules, the broker adapters, the signals to
producers, the records and the HTTP layer can share them without importing each other:
this module imports nothing from the rest of the sidecar. Frozen dataclasses, enums and
aliases, with a few derived properties: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

QueueKey = tuple[str, str]  # (vhost, queue name)

# -- a queue's limits (computed by sidecar/flow/queue_limits.py) --

DROP_HEAD = "drop-head"
RING = "ring"  # Qpid's qpid.policy_type=ring


@dataclass(frozen=True)
class LimitNames:
    """What a broker calls a queue's maxima, for refusal messages that name the setting
    the operator wrote (`max-length` on RabbitMQ, `qpid.max_count` on Qpid)."""

    count: str = "max-length"
    size: str = "max-length-bytes"
    default_size: str = "--default-queue-limit"


RABBITMQ_NAMES = LimitNames()


@dataclass(frozen=True)
class QueueLimits:
    """The maxima and overflow behaviour the broker enforces on one queue."""

    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = DROP_HEAD
    names: LimitNames = RABBITMQ_NAMES

    @property
    def ring(self) -> bool:
        """A queue that drops its oldest messages at its limit: Qpid's RING policy.

        RabbitMQ's default overflow is drop-head, so any queue with a broker-enforced
        maximum and no other overflow setting is a ring queue; a queue with no maximum
        at all is not (nothing is ever dropped). On Qpid, `qpid.policy_type=ring` says it
        (qpidd always bounds it, by --default-queue-limit when nothing else).
        """
        bounded = self.max_length is not None or self.max_length_bytes is not None
        return self.overflow == RING or (bounded and self.overflow == DROP_HEAD)

    def as_json(self) -> dict[str, Any]:
        """The limits as the API shows them."""
        return {
            "maxLength": self.max_length,
            "maxLengthBytes": self.max_length_bytes,
            "overflow": self.overflow,
            "ring": self.ring,
        }


# -- thresholds and their sources (resolved by sidecar/flow/thresholds.py) --


class Source(StrEnum):
    """Where a dimension's thresholds came from."""

    API = "api"
    ARGUMENTS = "arguments"
    VHOST = "vhost"
    DEFAULT = "default"
    DISABLED = "disabled"
    NONE = "none"



@dataclass(frozen=True)
class Level:
    """Resolved thresholds in one dimension; stop > 0 and resume <= stop always hold."""

    stop: int
    resume: int


@dataclass(frozen=True)
class Thresholds:
    """The levels the state machine uses; None in a dimension means it is not watched."""

    count: Level | None = None
    size: Level | None = None

    @property
    def enabled(self) -> bool:
        """Flow control applies when at least one dimension is watched."""
        return self.count is not None or self.size is not None



@dataclass(frozen=True)
class Resolution:
    """The effective thresholds of a queue, their sources, and what was wrong on the way."""

    thresholds: Thresholds
    count_source: Source
    size_source: Source
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()



# -- depth and transitions (sidecar/flow/state_machine.py) --


@dataclass(frozen=True)
class Depth:
    """Queue depth as Qpid counts it: every message on the queue, ready or unacknowledged.

    `bytes` is None when the broker reports no byte count for the queue (RabbitMQ's
    streams): unknown, never 0, and a size threshold cannot be judged against it.
    """

    messages: int
    bytes: int | None



class EventKind(StrEnum):
    """Transitions, named after Broker-J's QUE-1003 / QUE-1004 log messages."""

    OVERFULL = "overfull"
    UNDERFULL = "underfull"


@dataclass(frozen=True)
class FlowEvent:
    """One transition, with the figures that caused it (for logs, webhooks and history)."""

    kind: EventKind
    depth: Depth
    thresholds: Thresholds
    stopped_count: int


# -- what the broker reports, and what producers are told --


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
    # why the broker reports no byte count for this queue at all (its size is then not
    # watched); None: it does, or may a round later
    bytes_unreported: str | None = None


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
