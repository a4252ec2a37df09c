"""A queue's effective limits, derived from its declare arguments and its effective policy.

RabbitMQ lets both a queue's `x-*` arguments and a policy set `max-length`,
`max-length-bytes` and `overflow`. The broker resolves them differently per key (see
`rabbit_queue_type_util:args_policy_lookup`): for the two maxima the smaller value wins,
for `overflow` the queue's own argument wins. We mirror that here so the sidecar's idea of
a queue's maximum is the one the broker enforces. Pure: no I/O.
"""

from __future__ import annotations

import re
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


QPID_COUNT_MAX = 2**32 - 1  # qpidd keeps counts in 32 bits, sizes in 64
QPID_SIZE_MAX = 2**64 - 1
_QPID_DECIMAL = re.compile(r"\+?[0-9]+|-0+", re.ASCII)


def qpid_uint(value: object, largest: int) -> int | None:
    """A declare argument as qpidd's `Variant::asUint32`/`asUint64` converts it: an
    integer, or a decimal string (`"5"`, what UIs declare; boost::lexical_cast, so a sign
    but no spaces or fraction); None for what qpidd refuses to convert (it then refuses
    the declare, so no such queue exists to be read)."""
    if isinstance(value, str) and _QPID_DECIMAL.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= largest:
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
        max_length=qpid_uint(arguments.get("qpid.max_count"), QPID_COUNT_MAX),
        max_length_bytes=qpid_uint(arguments.get("qpid.max_size"), QPID_SIZE_MAX),
        overflow=policy if isinstance(policy, str) else "reject",
        names=QPID_NAMES,
    )
