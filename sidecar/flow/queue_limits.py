"""A queue's effective limits, derived from its declare arguments and its effective policy.

RabbitMQ lets both a queue's `x-*` arguments and a policy set `max-length`,
`max-length-bytes` and `overflow`. The broker resolves them differently per key (see
`rabbit_queue_type_util:args_policy_lookup`): for the two maxima the smaller value wins,
for `overflow` the queue's own argument wins. We mirror that here so the sidecar's idea of
a queue's maximum is the one the broker enforces. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.model import DROP_HEAD, RABBITMQ_NAMES, RING, LimitNames, QueueLimits

# the value types are sidecar.model's; re-exported for the modules that import them here
__all__ = [
    "DROP_HEAD",
    "QPID_NAMES",
    "RABBITMQ_NAMES",
    "RING",
    "LimitNames",
    "QueueLimits",
    "effective_limits",
    "non_negative_int",
    "qpid_limits",
]


# qpidd merges --default-queue-limit into the queue's qpid.max_size, and says so.
QPID_NAMES = LimitNames("qpid.max_count", "qpid.max_size", "qpid.max_size")


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
