"""Who filled it, wired: each queue's grants of the last minute, its producers' reports, and
at each stop the ranking (`top_producers`) for the QUE-1003 line, `/queues` and the history.

Nothing here runs on `/flow`: a grant is noted when it is answered (the grant routes), the
producers' reports are read only at a stop (`reports`, the reports' own listing), and the
ranking is computed once per stop over at most a minute of events. Memory is bounded: per
queue at most `per_queue` grants, queues whose grants are all older than the window are
dropped after each poll, and the last ranking is kept for at most `queues` queues (the
oldest stop goes first). The rankings live in memory only; the history keeps every stop's.
Rule and worked example: docs/graded-flow.md#who-filled-it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from sidecar.model import QueueKey
from sidecar.records.log_lines import top_producers_note
from sidecar.records.top_producers import (
    WINDOW,
    Contribution,
    Kind,
    ProducerEvent,
    top_producers,
)
from sidecar.signals.grant_desk import ANONYMOUS
from sidecar.signals.grants import Grant
from sidecar.signals.producer_reports import ProducerReports

log = logging.getLogger("flow_sidecar.filled")
# a queue's producers' reports that a stop at `at` may count (the reports' listing)
Reports = Callable[[QueueKey, float], Iterable[ProducerEvent]]
Ranking = tuple[Contribution, ...]


def reported_in(reports: ProducerReports) -> Reports:
    """The report source of `reports`: each producer's reports of the minute before a
    stop, as one event (what it published between its first and last report there)."""
    return lambda key, at: reports.events(key, at - WINDOW, at)


def ranking_json(ranking: Ranking) -> list[dict[str, Any]]:
    """`topProducers`: the ranking as the answers and the history show it."""
    return [{"producer": c.producer, "class": c.producer_class,
             "messages": round(c.messages), "share": round(c.share, 3)} for c in ranking]


class FilledBy:
    """Recent grants per queue and the ranking of each queue's last stop."""

    def __init__(self, reports: Reports | None = None, *, limit: int = 5,
                 per_queue: int = 4096, queues: int = 10_000) -> None:
        self.reports = reports
        self.limit = limit
        self.per_queue = per_queue
        self.queues = queues
        self._grants: dict[QueueKey, deque[ProducerEvent]] = {}
        self._last: dict[QueueKey, tuple[float, Ranking]] = {}  # oldest stop first

    def granted(self, made: Grant, now: float) -> None:
        """A grant was answered at `now`: it counts on each of its queues (a producer that
        did not say who it is is nobody to name)."""
        if made.producer == ANONYMOUS or made.messages <= 0:
            return
        for key in made.queues:
            events = self._grants.get(key)
            if events is None:
                events = self._grants[key] = deque(maxlen=self.per_queue)
            events.append(ProducerEvent(key, made.producer, None, Kind.GRANTED,
                                        made.messages, now))
            while events[0].at <= now - WINDOW:
                events.popleft()

    def sweep(self, now: float) -> None:
        """Poll hook: forget queues none of whose grants a stop from now on may count."""
        for key in [k for k, e in self._grants.items() if e[-1].at <= now - WINDOW]:
            del self._grants[key]

    def stopped(self, key: QueueKey, at: float) -> Ranking:
        """The queue stopped at `at`: rank who filled it, and keep that as its last stop."""
        events = [*self._grants.get(key, ()),
                  *(self.reports(key, at) if self.reports is not None else ())]
        ranking = tuple(top_producers(events, key, at, self.limit))
        self._remember(key, at, ranking)
        return ranking

    def _remember(self, key: QueueKey, at: float, ranking: Ranking) -> None:
        """Keep the queue's last stop, newest last, for at most `queues` queues."""
        self._last.pop(key, None)
        self._last[key] = (at, ranking)
        if len(self._last) > self.queues:
            del self._last[next(iter(self._last))]

    def stop_note(self, key: QueueKey, at: float) -> str:
        """What the stop's QUE-1003 line appends (`stopped`, then the producers named);
        nothing when a report source fails: naming producers must not stop flow control."""
        try:
            return top_producers_note(self.stopped(key, at))
        except Exception:
            log.exception("cannot rank the producers of %s", key)
            self._remember(key, at, ())  # not an earlier stop's producers
            return ""

    def last(self, key: QueueKey) -> tuple[float, Ranking] | None:
        """The queue's last stop since start-up, and who filled it; None: none yet."""
        return self._last.get(key)

    def top_json(self, key: QueueKey) -> list[dict[str, Any]] | None:
        """`topProducers` of the queue's last stop; None before its first."""
        last = self._last.get(key)
        return None if last is None else ranking_json(last[1])
