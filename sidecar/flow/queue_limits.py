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
from typing import Any

from sidecar.model import DROP_HEAD, RABBITMQ_NAMES, RING, LimitNames, QueueLimits

# the value types are sidecar.model's; re-exported for the modules that import them here
__all__ = [
    "DROP_HEAD",
    "QPID_COUNT_MAX",
    "QPID_NAMES",
    "QPID_SIZE_MAX",
    "RABBITMQ_NAMES",
    "RING",
    "LimitNames",
    "QueueLimits",
    "effective_limits",
    "non_negative_int",
    "qpid_limits",
    "qpid_uint",
]


# qpidd merges --default-queue-limit into the queue's qpid.max_size, and says so.
QPID_NAMES = LimitNames("qpid.max_count", "qpid.max_size", "qpid.max_size")


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
