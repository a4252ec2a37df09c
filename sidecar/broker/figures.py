"""Depth figures from a broker's answer, checked before any flow state sees them.

A depth decides what producers are told, so a figure no broker can hold must not move a
queue: a negative count would release a stopped queue (and bump its counter when the
next true figure stops it again), 10^30 would stop a flowing one. A figure that is
negative, not a JSON integer (a float, a string, a boolean, null) or beyond 2^63 - 1 (no
broker counts further) makes that queue's read a failed one: it keeps its state and goes
stale like a queue the broker did not answer for, and the operator gets a WARNING (at
most one a minute: a broker that keeps answering nonsense must not flood the log). A
figure that is absent is not an error: RabbitMQ leaves them out until a queue's first
statistics emission.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.records.log_lines import printable
from sidecar.records.throttled_log import ThrottledLog

log = logging.getLogger("flow_sidecar.broker")
MAX_FIGURE = 2**63 - 1


class BadFigure(ValueError):
    """A depth figure no broker can report; the text names the field and its value."""


def figure(item: Mapping[str, Any], key: str) -> int | None:
    """`item[key]` when it is a plausible count, None when the answer leaves it out;
    BadFigure otherwise."""
    if key not in item:
        return None
    value = item[key]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FIGURE:
        return value
    raise BadFigure(f"{key}={printable(repr(value)[:40])}")


def names_of(item: object, keys: Sequence[str]) -> list[str] | None:
    """The string values of `keys` in a queue item, or None when the item is not an object
    or any of them is not a string (a name shown as `"['x']"` or a vhost `"None"` would
    be a queue nobody can ask about)."""
    if not isinstance(item, dict):
        return None
    names = [item.get(key) for key in keys]
    return [str(n) for n in names] if all(isinstance(n, str) for n in names) else None


class FigureCheck:
    """Reads the depth figures of one broker's queue items, and keeps count of the queues
    whose figures were refused (`refused`, and the last one in `last_refused`, for
    /healthz); items that name no queue are left out, with a WARNING."""

    def __init__(self, interval: float = 60.0) -> None:
        self.throttle = ThrottledLog(log, interval)
        self.refused = 0
        self.last_refused: str | None = None

    def named(self, item: object, keys: Sequence[str]) -> list[str] | None:
        """`names_of(item, keys)`; a WARNING (at most one a minute) when None."""
        names = names_of(item, keys)
        if names is None:
            self.throttle.note("unnamed item", "broker listed a queue item without string "
                               "%s: %s; left out", " and ".join(keys),
                               printable(repr(item)[:80]))
        return names

    def figures(self, vhost: str, name: str, item: Mapping[str, Any],
                keys: Sequence[str]) -> list[int | None]:
        """The figures under `keys`, or all None (a failed read of this queue) when any
        of them is bad."""
        try:
            return [figure(item, key) for key in keys]
        except BadFigure as exc:
            self.refused += 1
            self.last_refused = f"[vh({printable(vhost)})/qu({printable(name)})] {exc}"
            self.throttle.note("bad figure", "broker reported an impossible depth figure "
                               "%s; the queue keeps its flow state until a plausible one "
                               "comes", self.last_refused)
            return [None] * len(keys)
