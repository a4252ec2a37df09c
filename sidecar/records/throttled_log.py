"""Log lines for events any client can repeat at will: one line per kind per interval.

An aborted upload, a connection that never finishes its headers, a request over the
connection cap: each deserves a line for the operator, but a client repeating it thousands
of times must not flood the log (and the disk). The first occurrence is logged at once;
later ones within `interval` seconds are counted, and the next line logged says how many
were left out. `ThrottledLines` does the same to another library's log records (uvicorn's).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Kind:
    logged_at: float
    left_out: int = 0


class ThrottledLog:
    """`note(kind, ...)` logs a WARNING at most once per `interval` seconds for each kind."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}

    def admit(self, kind: str) -> str | None:
        """None when `kind` was logged within the interval (it is counted); else the
        suffix a line logged now carries ("" or how many were left out)."""
        now = self.clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen.logged_at < self.interval:
            seen.left_out += 1
            return None
        self._kinds[kind] = _Kind(now)
        if seen is None or not seen.left_out:
            return ""
        return (f" ({seen.left_out:,} more like this in the last "
                f"{now - seen.logged_at:.0f} s not logged)")

    def note(self, kind: str, message: str, *args: object) -> bool:
        """Log `message % args` unless `kind` was logged within the interval; True if
        logged. Kinds are a few fixed names (never client input), so the table stays small."""
        suffix = self.admit(kind)
        if suffix is None:
            return False
        self.logger.warning(message + suffix, *args)
        return True


class ThrottledLines(logging.Filter):
    """A filter that lets through each of `messages` (exact format strings) at most once
    per interval, with the count of those left out; other records pass untouched."""

    def __init__(self, messages: frozenset[str], throttle: ThrottledLog) -> None:
        super().__init__()
        self.messages = messages
        self.throttle = throttle

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or record.msg not in self.messages:
            return True
        suffix = self.throttle.admit(record.msg)
        if suffix is None:
            return False
        record.msg += suffix
        return True
