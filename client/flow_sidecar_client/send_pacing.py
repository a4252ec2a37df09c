"""Spacing a paced publisher's sends at the `suggestedRate` the sidecar offers it (issue 43):
a token bucket. Pure: the caller passes the clock.

A publisher made with `pacing=True` takes a token per message. Tokens come at the rate of
the sidecar's last answer, up to `burst` of them (a short stall is made up, a long one is
not); without a rate (the queue is not paced) a send never waits, and a rate of 0 waits for
the next answer. The bucket is advice on top of flow control: a stopped destination or a
missing grant still holds a message back as before. See docs/producers.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Seconds of sending a bucket may hold: a paced publisher catches up at most this much.
BURST_SECONDS = 0.2
#: Longest wait (s) of a paced publisher's long polls: its reports and its rate stay fresh.
PACED_POLL = 1.0


@dataclass
class SendPacing:
    """The token bucket of one paced publisher (or of a shared watch's members)."""

    rate: float | None = None  # messages/s the sidecar offers; None: not paced
    tokens: float = 1.0
    at: float = 0.0  # the moment `tokens` was counted at

    @property
    def burst(self) -> float:
        """The most tokens the bucket holds: one message, or BURST_SECONDS of the rate."""
        return max(1.0, (self.rate or 0.0) * BURST_SECONDS)

    def offered(self, rate: float | None, now: float) -> None:
        """The sidecar's newest answer offered `rate` (None: none, the queue is not paced)."""
        self._fill(now)
        self.rate = None if rate is None else max(0.0, rate)
        self.tokens = min(self.tokens, self.burst)

    def wait(self, now: float) -> float:
        """Seconds until a message may go (0: now; inf: a rate of 0, until a new rate)."""
        if self.rate is None:
            return 0.0
        self._fill(now)
        if self.tokens >= 1.0:
            return 0.0
        return math.inf if self.rate <= 0 else (1.0 - self.tokens) / self.rate

    def sent(self, now: float) -> None:
        """A message went: one token less (a publisher not paced keeps its bucket full)."""
        if self.rate is not None:
            self._fill(now)
            self.tokens -= 1.0

    def _fill(self, now: float) -> None:
        if self.rate is not None and now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = max(self.at, now)
