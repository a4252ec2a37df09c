"""A clock the test moves by hand: pass it where the code takes `clock=` (a callable
returning seconds) and set `now`."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
