"""Log lines for events any client can repeat at will: one line per kind per interval.

An aborted upload, a connection that never finishes its headers, a refused webhook target:
each deserves a line for the operator, but a client repeating it thousands of times must not
flood the log (and the disk). The first occurrence is logged at once; later ones within
`interval` seconds are counted, and the next line logged says how many were left out.
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

    def note(self, kind: str, message: str, *args: object) -> bool:
        """Log `message % args` unless `kind` was logged within the interval; True if
        logged. Kinds are a few fixed names (never client input), so the table stays small."""
        now = self.clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen.logged_at < self.interval:
            seen.left_out += 1
            return False
        if seen is not None and seen.left_out:
            message += f" ({seen.left_out:,} more like this in the last "
            message += f"{now - seen.logged_at:.0f} s not logged)"
        self.logger.warning(message, *args)
        self._kinds[kind] = _Kind(now)
        return True
