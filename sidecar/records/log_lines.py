"""Operator log lines with Qpid's message IDs and Broker-J's wording.

Operators grep broker logs for QUE-1003/QUE-1004 (queue overfull/underfull) and
CHN-1005/CHN-1006 (a producer blocked/released); keeping the IDs and phrasing lets their
existing alerts and runbooks work on the sidecar's log unchanged.

Names in these lines come from outside (queue and vhost names from the broker, producer
ids from request headers), and RabbitMQ accepts control characters in names: `printable`
escapes them, so no name can break a line in two or forge one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from sidecar.flow.state_machine import Depth, EventKind, FlowEvent
from sidecar.records.top_producers import Contribution

_LINE_BREAKING = {"Cc", "Zl", "Zp"}  # C0/C1 controls, line and paragraph separators


def printable(text: str) -> str:
    """`text` with control characters and line separators escaped (`\\n`, `\\x00`,
    `\\u2028`), for a log line; everything else, any Unicode included, is kept."""
    if text.isprintable():  # the common case, fast
        return text
    return "".join(
        repr(c)[1:-1] if unicodedata.category(c) in _LINE_BREAKING else c for c in text)


def _n(value: int) -> str:
    """Broker-J's number format."""
    return f"{value:,}"


def _subject(vhost: str, queue: str) -> str:
    return f"[vh({printable(vhost)})/qu({printable(queue)})]"


def _depth_only(depth: Depth) -> list[str]:
    sizes = [] if depth.bytes is None else [f"Size : {_n(depth.bytes)} bytes"]
    return [*sizes, f"Messages : {_n(depth.messages)}"]


def transition_line(vhost: str, queue: str, event: FlowEvent, reason: str = "") -> str:
    """QUE-1003 for OFF -> ON, QUE-1004 for ON -> OFF, with the figures of each watched
    dimension only: an unwatched one has no capacity to show (printing Qpid's 0 there
    reads as a limit of zero). With none watched (flow control disabled) the depth alone.
    As in Broker-J, QUE-1004's "Message Capacity" is the count resume threshold."""
    count, size, depth = event.thresholds.count, event.thresholds.size, event.depth
    overfull = event.kind is EventKind.OVERFULL
    figures = []
    if size is not None and depth.bytes is not None:
        capacity = ("Capacity", size.stop) if overfull else ("Resume Capacity", size.resume)
        figures.append(f"Size : {_n(depth.bytes)} bytes, {capacity[0]} : {_n(capacity[1])}")
    if count is not None:
        figures.append(f"Messages : {_n(depth.messages)}, Message Capacity : "
                       f"{_n(count.stop if overfull else count.resume)}")
    head = "QUE-1003 : Overfull" if overfull else "QUE-1004 : Underfull"
    body = ", ".join(figures or _depth_only(depth))
    suffix = f" ({printable(reason)})" if reason else ""
    return f"{_subject(vhost, queue)} {head} : {body}{suffix}"


def top_producers_note(ranking: Sequence[Contribution]) -> str:
    """What a QUE-1003 line appends after Qpid's words: who filled the queue in the minute
    before (docs/graded-flow.md#who-filled-it), most first; nothing when nobody is known."""
    if not ranking:
        return ""
    names = ", ".join(
        printable(c.producer) + ("" if c.producer_class is None
                                 else f" [{printable(c.producer_class)}]")
        + f" {_n(round(c.messages))} ({c.share:.0%})" for c in ranking)
    return f" - top producers: {names}"


WARNING_ID, CLEARED_ID = "FSW-4301", "FSW-4302"  # flow-sidecar's own: Qpid never warns


def warning_line(vhost: str, queue: str, *, started: bool, episode: int, depth: Depth | None,
                 seconds_to_stop: float | None, fill_rate: float | None,
                 lasted: float) -> str:
    """One line when a queue's warning episode starts (FSW-4301) and one when it ends
    (FSW-4302), in the QUE lines' manner: the depth, how far the stop is at what rate,
    and for the end how long the episode lasted. Advice: nobody was stopped by it."""
    figures = [] if depth is None else _depth_only(depth)
    if started:
        if seconds_to_stop is not None and fill_rate is not None:
            figures.append(f"Seconds To Stop : {seconds_to_stop:,.1f} at "
                           f"{fill_rate:,.1f} messages/s")
        head = f"{WARNING_ID} : Flow Warning"
    else:
        figures.append(f"Lasted : {lasted:,.1f} s")
        head = f"{CLEARED_ID} : Flow Warning Cleared"
    return f"{_subject(vhost, queue)} {head} : {', '.join(figures)} (episode {episode})"


def enforced_line(producer: str, queue: str) -> str:
    """CHN-1005: a producer was told to stop for this queue."""
    return (f"[producer({printable(producer)})] CHN-1005 : Flow Control Enforced "
            f"(Queue {printable(queue)})")


def removed_line(producer: str) -> str:
    """CHN-1006: a producer was told it may send again."""
    return f"[producer({printable(producer)})] CHN-1006 : Flow Control Removed"


STORE = "queues"  # Broker-J names its message store class; ours is the sum of the queues


def store_line(vhost: str, event: FlowEvent, reason: str = "") -> str:
    """MST-1008 when a vhost's quota goes overfull, MST-1009 when that clears, in Broker-J's
    words, then the vhost's total in each dimension, each followed by the quota's level
    where the quota watches it (as QUE-1003/1004 pair a figure with its capacity)."""
    count, size, depth = event.thresholds.count, event.thresholds.size, event.depth
    overfull = event.kind is EventKind.OVERFULL
    word = "Overfull" if overfull else "Underfull"
    figures = []
    if depth.bytes is not None:
        figures.append(f"Size : {_n(depth.bytes)} bytes")
        if size is not None:
            figures.append(f"{word} Size : {_n(size.stop if overfull else size.resume)}")
    figures.append(f"Messages : {_n(depth.messages)}")
    if count is not None:
        figures.append(f"{word} Messages : {_n(count.stop if overfull else count.resume)}")
    if reason:
        figures.append(printable(reason))
    body = ("MST-1008 : Store overfull, flow control will be enforced" if overfull
            else "MST-1009 : Store overfull condition cleared")
    return f"[vh({printable(vhost)})/ms({STORE})] {body} ({', '.join(figures)})"
