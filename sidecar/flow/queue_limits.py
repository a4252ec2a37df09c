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


@dataclass(frozen=True)
class QueueLimits:
    """The maxima and overflow behaviour the broker enforces on one queue."""

    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = DROP_HEAD

    @property
    def ring(self) -> bool:
        """A queue that drops its oldest messages at its limit: Qpid's RING policy.

        RabbitMQ's default overflow is drop-head, so any queue with a broker-enforced
        maximum and no other overflow setting is a ring queue; a queue with no maximum
        at all is not (nothing is ever dropped).
        """
        bounded = self.max_length is not None or self.max_length_bytes is not None
        return bounded and self.overflow == DROP_HEAD

    def as_json(self) -> dict[str, Any]:
        """The limits as the API shows them."""
        return {
            "maxLength": self.max_length,
            "maxLengthBytes": self.max_length_bytes,
            "overflow": self.overflow,
            "ring": self.ring,
        }


def _non_negative_int(value: object) -> int | None:
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
            _non_negative_int(arguments.get("x-max-length")),
            _non_negative_int(policy.get("max-length")),
        ),
        max_length_bytes=_smaller(
            _non_negative_int(arguments.get("x-max-length-bytes")),
            _non_negative_int(policy.get("max-length-bytes")),
        ),
        overflow=overflow,
    )
