"""What producers say they published (`X-Producer-Published`), as dated reports per queue and
producer: their reported rates and sums feed pacing and "who filled it" (issue 43).

A producer sends its count of messages published so far to the destination on its `/flow`
requests; each request it makes becomes a report (moment, count). Memory only, O(1) per
request on the hot path: a report closer than `spacing` seconds to the one before the newest
replaces the newest (so the `keep` reports kept span `keep` / 2 x `spacing` seconds at
least: 80 s, over the minute "who filled it" looks back), a count lower than
the last one starts the producer afresh (it restarted), producers silent for `forget_after`
seconds are dropped by a sweep the poll runs (`on_poll`, at most every `sweep_every` seconds:
never inside a request), and a queue takes at most
`per_queue` producers (a new one beyond that is not recorded). A producer that leaves
(`DELETE /producers/{id}`) keeps its reports until they age out: "who filled it" may still
name it. Between two reports the
messages are taken as sent evenly, as far as anyone can tell. With shared state, the reports
other replicas heard (`adopt`, sidecar.cluster.shared_reports) count beside these: per
producer, the series with the newest report. See docs/graded-flow.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sidecar.model import QueueKey
from sidecar.records.top_producers import Kind, ProducerEvent

Report = tuple[float, int]  # (moment, cumulative count): a plain tuple, made per request
Heard = tuple[str | None, Sequence[Report]]  # a producer's class and reports, oldest first


@dataclass(slots=True)
class _Reports:
    """One producer's reports on one queue, oldest first."""

    reports: deque[Report]
    producer_class: str | None = None


@dataclass
class ProducerReports:
    """Dated reports per queue and producer; see the module docstring."""

    keep: int = 160
    spacing: float = 1.0
    forget_after: float = 180.0
    per_queue: int = 1_000
    sweep_every: float = 30.0
    # told the queue when a producer it does not hold reports first (the history's
    # `settings` record of pacing in use): once per producer heard, not per request
    on_new_producer: Callable[[QueueKey], None] | None = None
    _queues: dict[QueueKey, dict[str, _Reports]] = field(default_factory=dict)
    _swept_at: float = 0.0
    _shared: dict[QueueKey, dict[str, _Reports]] = field(default_factory=dict)

    def record(self, queue: QueueKey, producer: str, published: int, now: float,
               producer_class: str | None = None) -> bool:
        """Note that `producer` said at `now` it had published `published` messages to
        `queue`; False when the queue has `per_queue` producers already."""
        producers = self._queues.setdefault(queue, {})
        known = producers.get(producer)
        if known is None:
            if len(producers) >= self.per_queue:
                return False
            known = producers[producer] = _Reports(deque(maxlen=self.keep))
            if self.on_new_producer is not None:
                self.on_new_producer(queue)
        reports = known.reports
        if producer_class is not None:
            known.producer_class = producer_class
        if reports and (published < reports[-1][1] or now < reports[-1][0]):
            reports.clear()  # a restarted producer counts from 0 again
        if len(reports) >= 2 and now - reports[-2][0] < self.spacing:
            reports[-1] = (now, published)
        else:
            reports.append((now, published))
        return True

    def on_poll(self, now: float) -> None:
        """The poll's turn: `sweep` when the last was `sweep_every` seconds ago or more."""
        if now - self._swept_at >= self.sweep_every:
            self.sweep(now)

    def sweep(self, now: float) -> None:
        """Drop producers silent for `forget_after` seconds, and queues left without any."""
        self._swept_at = now
        for queue in list(self._queues):
            producers = self._queues[queue]
            for producer in [p for p, r in producers.items()
                             if now - r.reports[-1][0] > self.forget_after]:
                del producers[producer]
            if not producers:
                del self._queues[queue]

    def producers(self, queue: QueueKey) -> list[str]:
        """The producers with reports on `queue` (other replicas' included)."""
        return list(self._on(queue))

    def heard(self, wanted: Callable[[QueueKey], bool]) -> dict[QueueKey, dict[str, Heard]]:
        """The reports this replica heard itself on the queues `wanted`, for its record."""
        return {key: {p: (r.producer_class, r.reports) for p, r in producers.items()}
                for key, producers in self._queues.items() if wanted(key)}

    def adopt(self, shared: Mapping[QueueKey, Mapping[str, Heard]]) -> None:
        """Take `shared` (the union of the replicas' records) as what others heard; it
        replaces what was adopted before."""
        self._shared = {key: {p: _Reports(deque(reports), cls)
                              for p, (cls, reports) in producers.items()}
                        for key, producers in shared.items()}

    def _on(self, queue: QueueKey) -> dict[str, _Reports]:
        """Every producer's reports on `queue`: this replica's, or another's when newer."""
        local = self._queues.get(queue, {})
        shared = self._shared.get(queue)
        if not shared:
            return local
        merged = dict(shared)
        for producer, known in local.items():
            other = merged.get(producer)
            if other is None or known.reports[-1][0] >= other.reports[-1][0]:
                merged[producer] = known
        return merged

    def reported_rate(self, queue: QueueKey, producer: str, now: float,
                      window: float) -> float | None:
        """What `producer` published to `queue` per second over the last `window` seconds
        before `now`; None when it has not reported twice in that window."""
        known = self._queues.get(queue, {}).get(producer)
        other = self._shared.get(queue, {}).get(producer)
        if other is not None and (known is None or other.reports[-1][0] > known.reports[-1][0]):
            known = other
        if known is None:
            return None
        inside = [r for r in known.reports if now - window <= r[0] <= now]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    def published(self, queue: QueueKey, since: float, until: float) -> float:
        """The messages the producers of `queue` published from `since` to `until`, as
        their reports say: each at the rate of its reports over the part of that span they
        cover (a report interval straddling either end counts in proportion), so that a
        producer whose newest report is a little older than `until` is not taken for one
        that slowed down."""
        total = 0.0
        for known in self._on(queue).values():
            span = _span(known.reports, since, until)
            if span is not None:
                start, first, end, last = span
                total += (last - first) / (end - start) * (until - since)
        return total

    def events(self, queue: QueueKey, since: float, until: float) -> list[ProducerEvent]:
        """Each producer's reports from `since` to `until` as one `ProducerEvent` (its
        messages between its first and last report there): for "who filled it"."""
        found = []
        for producer, known in self._on(queue).items():
            inside = [r for r in known.reports if since <= r[0] <= until]
            if len(inside) >= 2:
                found.append(ProducerEvent(queue, producer, known.producer_class,
                                           Kind.PUBLISHED, inside[-1][1] - inside[0][1],
                                           inside[-1][0], inside[0][0]))
        return found


def _count_at(reports: deque[Report], moment: float) -> float | None:
    """The count at `moment`, interpolated between the reports around it; None outside."""
    before: Report | None = None
    for report in reports:
        if report[0] >= moment:
            if report[0] == moment or before is None:
                return float(report[1]) if report[0] == moment else None
            part = (moment - before[0]) / (report[0] - before[0])
            return before[1] + part * (report[1] - before[1])
        before = report
    return None


def _span(reports: deque[Report], since: float, until: float
          ) -> tuple[float, float, float, float] | None:
    """(start, count there, end, count there) of the reports' overlap with [since, until],
    the ends interpolated; None without any overlap of two reports."""
    if len(reports) < 2:
        return None
    start, end = max(since, reports[0][0]), min(until, reports[-1][0])
    if end <= start:
        return None
    first, last = _count_at(reports, start), _count_at(reports, end)
    if first is None or last is None:
        return None
    return start, first, end, last
