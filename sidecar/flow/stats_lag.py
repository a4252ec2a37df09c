"""How far the broker's statistics lag, measured from live samples. Pure: no I/O, no clock.

A statistics figure describes some moment before the poll that read it; how long before
depends on the broker's `collect_statistics_interval` (5 s by default, then up to about
10 s late), its sampling policies and its load, none of which RabbitMQ's API states. The
sidecar's promises rest on that lag (a poll's figures are dated its first request less
the lag), so it is measured rather than assumed:

a queue read live has a history of ready counts, each dated before its declare was sent.
When a poll sent at `sent_at` reports a ready count R for it, the statistics describe a
moment when the queue held R. If the live history shows R last in a run of samples that
ended, at the next sample, with another count, that moment came before that next sample:
the lag is at least `sent_at` minus its time. (Only the changes of a live count are kept,
at most `HISTORY` per queue over `KEEP` seconds, so memory stays small at any rate.) Such
lower bounds, over the last `window` observations, give the measured lag (their
`quantile`: a flicker the live samples missed can only make one observation too large,
never too small).

The engine uses the larger of the option (`--broker-stats-lag`) and the measurement.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

HISTORY = 32  # changes of the live count kept per queue
KEEP = 60.0  # seconds of live history kept


class LagMeter:
    """Lower bounds of the statistics' lag, from live histories (see the module docstring)."""

    def __init__(self, window: int = 64, quantile: float = 0.9) -> None:
        self._live: dict[Hashable, deque[tuple[float, int]]] = {}
        self._observed: deque[float] = deque(maxlen=window)
        self.quantile = quantile

    def live(self, key: Hashable, at: float, ready: int) -> None:
        """A live ready count of `key` describing the moment `at`."""
        history = self._live.get(key)
        if history is None:
            history = self._live[key] = deque(maxlen=HISTORY)
        # only changes are kept: a run of equal counts is dated by its first sample, and
        # the first sample of the next run is what ends it
        if not history or (at > history[-1][0] and ready != history[-1][1]):
            history.append((at, ready))

    def follows(self, key: Hashable) -> bool:
        """Whether `key` has a live history (else `statistics` tells nothing of it)."""
        return key in self._live

    def statistics(self, key: Hashable, sent_at: float, ready: int) -> float | None:
        """A poll sent at `sent_at` says `key` had `ready` messages ready; the lower bound of
        the lag it shows, if any (also kept for `measured`)."""
        history = self._live.get(key)
        if not history:
            return None
        while history and history[0][0] < sent_at - KEEP:
            history.popleft()
        if not history:
            del self._live[key]
            return None
        after = None
        for at, count in reversed(history):
            if count == ready:
                break
            after = at
        else:
            return None  # never seen live: nothing to date it by
        if after is None or after >= sent_at:
            return None  # still that count: the figure may be as new as the poll
        lag = sent_at - after
        self._observed.append(lag)
        return lag

    def measured(self) -> float | None:
        """The lag the recent observations show, or None before the first."""
        if not self._observed:
            return None
        ordered = sorted(self._observed)
        return ordered[min(len(ordered) - 1, int(self.quantile * len(ordered)))]

    def forget(self, keep: Iterable[Hashable]) -> None:
        """Drop the histories of queues outside `keep` (deleted queues)."""
        for key in self._live.keys() - keep:  # in C: a loop in Python took 1-2 ms a poll
            del self._live[key]
