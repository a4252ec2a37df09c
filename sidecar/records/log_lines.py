"""Operator log lines with Qpid's message IDs and Broker-J's wording.

Operators grep broker logs for QUE-1003/QUE-1004 (queue overfull/underfull) and
CHN-1005/CHN-1006 (a producer blocked/released); keeping the IDs and phrasing lets their
existing alerts and runbooks work on the sidecar's log unchanged.
"""

from __future__ import annotations

from sidecar.flow.state_machine import EventKind, FlowEvent
from sidecar.flow.thresholds import Level


def _n(value: int | None) -> str:
    """Broker-J's number format; an unwatched dimension shows 0, Qpid's "no limit"."""
    return f"{value or 0:,}"


def _subject(vhost: str, queue: str) -> str:
    return f"[vh({vhost})/qu({queue})]"


def transition_line(vhost: str, queue: str, event: FlowEvent, reason: str = "") -> str:
    """QUE-1003 for OFF -> ON, QUE-1004 for ON -> OFF, with both dimensions' figures.
    As in Broker-J, QUE-1004's "Message Capacity" is the count resume threshold."""
    count: Level | None = event.thresholds.count
    size: Level | None = event.thresholds.size
    d = event.depth
    if event.kind is EventKind.OVERFULL:
        body = (
            f"QUE-1003 : Overfull : Size : {_n(d.bytes)} bytes, "
            f"Capacity : {_n(size.stop if size else None)}, "
            f"Messages : {_n(d.messages)}, Message Capacity : {_n(count.stop if count else None)}"
        )
    else:
        body = (
            f"QUE-1004 : Underfull : Size : {_n(d.bytes)} bytes, "
            f"Resume Capacity : {_n(size.resume if size else None)}, "
            f"Messages : {_n(d.messages)}, "
            f"Message Capacity : {_n(count.resume if count else None)}"
        )
    suffix = f" ({reason})" if reason else ""
    return f"{_subject(vhost, queue)} {body}{suffix}"


def enforced_line(producer: str, queue: str) -> str:
    """CHN-1005: a producer was told to stop for this queue."""
    return f"[producer({producer})] CHN-1005 : Flow Control Enforced (Queue {queue})"


def removed_line(producer: str) -> str:
    """CHN-1006: a producer was told it may send again."""
    return f"[producer({producer})] CHN-1006 : Flow Control Removed"


STORE = "queues"  # Broker-J names its message store class; ours is the sum of the queues


def store_line(vhost: str, event: FlowEvent, reason: str = "") -> str:
    """MST-1008 when a vhost's quota goes overfull, MST-1009 when that clears, in Broker-J's
    words, then the figures (its vhost total against the quota) as QUE-1003/1004 give them."""
    count: Level | None = event.thresholds.count
    size: Level | None = event.thresholds.size
    d = event.depth
    if event.kind is EventKind.OVERFULL:
        body = "MST-1008 : Store overfull, flow control will be enforced"
        levels = (f"Overfull Size : {_n(size.stop if size else None)}, Messages : "
                  f"{_n(d.messages)}, Overfull Messages : {_n(count.stop if count else None)}")
    else:
        body = "MST-1009 : Store overfull condition cleared"
        levels = (f"Underfull Size : {_n(size.resume if size else None)}, Messages : "
                  f"{_n(d.messages)}, Underfull Messages : "
                  f"{_n(count.resume if count else None)}")
    suffix = f", {reason}" if reason else ""
    return f"[vh({vhost})/ms({STORE})] {body} (Size : {_n(d.bytes)} bytes, {levels}{suffix})"
