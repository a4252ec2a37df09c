"""The seed's capacity-window check, in messages and in bytes (pure).

"This capacity window must be considered when determining a suitable flow stop threshold":
a producer may have its capacity's worth of messages in flight when a queue stops, so stop
+ the active producers' summed capacity must fit under the queue's maximum, or the queue
can still overflow. Over RabbitMQ producers also keep sending for as long as the stop takes
to reach them, so the check adds what the queue receives meanwhile.

Per dimension: messages against the broker-enforced `max-length` with `X-Producer-Capacity`,
bytes against `max-length-bytes` with `X-Producer-Capacity-Bytes`. Producers declare their
byte window optionally; while an active producer with a window has not declared it, the
size dimension cannot be judged, and the answer says so rather than say "no risk".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Thresholds


@dataclass(frozen=True)
class Window:
    """The summed windows of a queue's active producers."""

    messages: int = 0
    bytes: int | None = None  # declared X-Producer-Capacity-Bytes; None: none declared
    undeclared_bytes: int = 0  # producers with a message window but no declared bytes


@dataclass(frozen=True)
class OverflowRisk:
    """The queue can overflow before its producers block: stop + overshoot > max."""

    stop: int
    capacity: int
    during_reaction: int
    maximum: int
    limit: str = "max-length"
    unit: str = ""

    def describe(self) -> str:
        u = self.unit
        lag = (f" + {self.during_reaction}{u} published while the stop reaches them"
               if self.during_reaction else "")
        total = self.stop + self.capacity + self.during_reaction
        return (f"stop {self.stop}{u} + active producers' capacity {self.capacity}{u}{lag} = "
                f"{total}{u} > {self.limit} {self.maximum}")


def overflow_risk(stop: int | None, capacity: int, during_reaction: int,
                  maximum: int | None, *, limit: str = "max-length",
                  unit: str = "") -> OverflowRisk | None:
    """The check in one dimension; None when the queue cannot overflow this way."""
    overshoot = capacity + during_reaction
    if stop is None or maximum is None or overshoot == 0 or stop + overshoot <= maximum:
        return None
    return OverflowRisk(stop, capacity, during_reaction, maximum, limit, unit)


def mean_message_bytes(depth: Depth | None) -> int:
    """The queue's mean message size at its last sample (0 when it cannot be told), to
    turn messages published during the reaction time into bytes."""
    if depth is None or depth.bytes is None or depth.messages == 0:
        return 0
    return math.ceil(depth.bytes / depth.messages)


@dataclass(frozen=True)
class Check:
    """Both dimensions' verdicts: the risks found, and why a dimension cannot be judged."""

    risks: tuple[OverflowRisk, ...] = ()
    unjudged: str | None = None


def capacity_check(thresholds: Thresholds, max_length: int | None,
                   max_length_bytes: int | None, window: Window, during_reaction: int,
                   depth: Depth | None) -> Check:
    """The capacity-window check of one queue; `during_reaction` is in messages."""
    count, size = thresholds.count, thresholds.size
    risks = [overflow_risk(count.stop if count else None, window.messages, during_reaction,
                           max_length)]
    unjudged = None
    if size is not None and max_length_bytes is not None:
        by_size = overflow_risk(size.stop, window.bytes or 0,
                                during_reaction * mean_message_bytes(depth), max_length_bytes,
                                limit="max-length-bytes", unit=" bytes")
        risks.append(by_size)
        if by_size is None and window.undeclared_bytes:
            # what the declared windows alone show is a lower bound: no verdict
            unjudged = (f"size: {window.undeclared_bytes} active producer(s) declared no "
                        f"X-Producer-Capacity-Bytes, so stop {size.stop} bytes + their "
                        f"capacity cannot be judged against max-length-bytes "
                        f"{max_length_bytes}")
    return Check(tuple(r for r in risks if r is not None), unjudged)
