"""`suggestedRate`: what each registered producer of a paced queue is offered (issue 43,
docs/graded-flow.md "Pacing"), from the queue's entry (its pacing state, net fill rate,
depth and thresholds), the producer registry and the producers' reports.

A queue's rates are worked out at most once a second, or when its entry or its set of
producers changes, on the event loop, and only when a producer that said who it is asks
about a paced queue: a queue that is not paced costs a field read. A rate is advice and
never a release: while the queue is told to stop every producer is offered 0, and what
it is told (`flowStopped`) stays the flow machine's. No rate is known (the field stays
out of the answer) before the queue has a fill rate.
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.flow.pacing import Producer, Tuning, drain_rate, suggested_rates
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.producers import ProducerRegistry

RECOMPUTE_EVERY = 1.0  # seconds a queue's rates stand while nothing else moves
REPORT_WINDOW = 10.0  # seconds of a producer's reports its reported rate is taken over
KEEP = 10_000  # queues whose rates are kept; beyond that the table starts afresh

_Cached = tuple[tuple[int, int], float, dict[str, float]]  # (stamp, made at, rates)


class PacingOffers:
    """Each paced queue's rates per producer; see the module docstring."""

    def __init__(self, producers: ProducerRegistry, reports: ProducerReports,
                 tuning: Tuning | None = None) -> None:
        self.producers = producers
        self.reports = reports
        self.tuning = tuning or Tuning()
        self._rates: dict[QueueKey, _Cached] = {}

    def rate(self, entry: QueueEntry, producer_id: str, now: float) -> float | None:
        """The rate (messages/s) `producer_id` is offered for `entry`'s queue now; None
        when the queue is not paced or no rate is known."""
        if not entry.pacing.engaged:
            return None
        if entry.told_stopped:
            return 0.0
        key = entry.key
        stamp = (entry.revision, self.producers.revision(key))
        cached = self._rates.get(key)
        if cached is None or cached[0] != stamp or now - cached[1] >= RECOMPUTE_EVERY:
            if len(self._rates) >= KEEP and key not in self._rates:
                self._rates.clear()
            cached = self._rates[key] = (stamp, now, self._work_out(entry, now))
        return cached[2].get(producer_id)

    def offered(self, entry: QueueEntry) -> float | None:
        """What all of a paced queue's producers were offered together when one last asked
        (0 while it is told to stop), for `/metrics`: the rates are never worked out for
        it; None when the queue is not paced or nobody asked yet."""
        if not entry.pacing.engaged:
            return None
        if entry.told_stopped:
            return 0.0
        cached = self._rates.get(entry.key)
        return None if cached is None else sum(cached[2].values())

    def _work_out(self, entry: QueueEntry, now: float) -> dict[str, float]:
        """The rate of every producer registered here or reporting lately (to any replica),
        from the drain the fill rate and the reports say; {} without a fill rate or a
        depth."""
        fill, depth = entry.fill, entry.depth
        if fill is None or depth is None:
            return {}
        if entry.flat and entry.flat_until > fill.at:
            # figures all equal since (`forecast`: none is kept): no net fill up to the
            # newest of them, and the reports of that window are what the consumers took
            fill = replace(fill, messages=0.0, since=entry.flat_until - (fill.at - fill.since),
                           at=entry.flat_until)
        key = entry.key
        drain = drain_rate(fill, self.reports.published(key, fill.since, fill.at))
        rates = {p: self.reports.reported_rate(key, p, now, REPORT_WINDOW)
                 for p in self.producers.active(key)}
        # and the producers other replicas heard report lately (their records): each
        # replica shares the one total among all of them, not among its own alone
        for p in self.reports.producers(key):
            if p not in rates and (rate := self.reports.reported_rate(
                    key, p, now, REPORT_WINDOW)) is not None:
                rates[p] = rate
        producers = [Producer(p, reported_rate=rate) for p, rate in rates.items()]
        return suggested_rates(True, False, drain, depth, entry.resolution.thresholds,
                               producers, self.tuning)
