"""A queue's effective limits, derived from its declare arguments and its effective policy.

RabbitMQ lets both a queue's `x-*` arguments and a policy set `max-length`,
`max-length-bytes` and `overflow`. The broker resolves them differently per key (see
`rabbit_queue_type_util:args_policy_lookup`): for the two maxima the smaller value wins,
for `overflow` the queue's own argument wins. We mirror that here so the sidecar's idea of
a queue's maximum is the one the broker enforces. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
# qpidd merges --default-queue-limit into the queue's qpid.max_size, and says so.
QPID_NAMES = LimitNames("qpid.max_count", "qpid.max_size", "qpid.max_size")


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


def non_negative_int(value: object) -> int | None:
    """A usable limit value, or None for anything the broker itself would ignore."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _smaller(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def effective_limits(arguments: Mapping[str, Any], policy: Mapping[str, Any]) -> QueueLimits:
    """Combine `x-max-length*`/`x-overflow` arguments with an effective policy definition."""
    overflow = arguments.get("x-overflow")
    if not isinstance(overflow, str):
        overflow = policy.get("overflow")
    if not isinstance(overflow, str):
        overflow = DROP_HEAD
    return QueueLimits(
        max_length=_smaller(
            non_negative_int(arguments.get("x-max-length")),
            non_negative_int(policy.get("max-length")),
        ),
        max_length_bytes=_smaller(
            non_negative_int(arguments.get("x-max-length-bytes")),
            non_negative_int(policy.get("max-length-bytes")),
        ),
        overflow=overflow,
    )


def qpid_limits(arguments: Mapping[str, Any]) -> QueueLimits:
    """A Qpid C++ queue's limits from its declare arguments: `qpid.max_count`,
    `qpid.max_size` (an explicit 0 means no limit, and no default either) and
    `qpid.policy_type` (`reject`, qpidd's default, or `ring`)."""
    policy = arguments.get("qpid.policy_type")
    return QueueLimits(
        max_length=non_negative_int(arguments.get("qpid.max_count")),
        max_length_bytes=non_negative_int(arguments.get("qpid.max_size")),
        overflow=policy if isinstance(policy, str) else "reject",
        names=QPID_NAMES,
    )
