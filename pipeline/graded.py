"""Graded flow in the history (issue 43): how early warnings came, how many were false, how
much queues flapped before and after pacing or classes, and who filled each stop. Pure:
plain rows in, plain rows out; no Spark (`pipeline/graded_tables.py` feeds it).

Per queue, from one source (the replica that recorded the most of its stops and warnings):

- A **warning episode** runs from its `warning` record to its `warning-cleared` record
  (both `ts`, the sidecar's clock, as the stops' transitions; open when none came; from
  its `startedAt` when only the end is in the data). It is **followed by a stop** when an `overfull` transition falls
  in it (a stop does not end an episode: docs/graded-flow.md); its **lead time** is that
  first stop's moment less the episode's start. An episode without one is a **false
  warning**. A stop that no episode covers is a stop **without warning**.
- Lead times: p50 and p10 over the queue's episodes followed by a stop, by nearest rank
  (p10: a tenth of those warnings came at most this early).
- **Enabled**: the first `settings` record naming producer classes or `pacing: true`.
  **Flapping** is stops per observed hour (the hourly summary's `flowStoppedCount` and
  `observedSeconds`), over the hours that ended by that moment (before) and those that
  began at or after it (after); the hour it falls in counts for neither. Never enabled:
  every hour is "before".
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

HOUR = 3600.0
Queue = tuple[str, str]


@dataclass(frozen=True)
class Episode:
    """A warning episode: its start and end (None: still open in the data)."""

    start: float
    end: float | None = None


@dataclass(frozen=True)
class Stop:
    """A stop (`overfull` transition) and who filled the queue before it, most first:
    (producer, class, messages, share)."""

    at: float
    top: tuple[tuple[str, str | None, int, float], ...] = ()


@dataclass
class QueueRows:
    """What one source recorded of one queue: warning episodes by start, stops, and the
    moments graded flow was enabled."""

    episodes: dict[float, Episode] = field(default_factory=dict)
    stops: list[Stop] = field(default_factory=list)
    enabled: list[float] = field(default_factory=list)

    def add(self, row: dict[str, Any]) -> None:
        """One history record of type `warning`, `transition` (`overfull`) or `settings`."""
        kind, ts = row["type"], float(row["ts"])
        if kind == "warning":  # both records of an episode name its `startedAt`
            key = float(row.get("startedAt") or ts)
            known = self.episodes.get(key)
            if row.get("event") == "warning-cleared":
                self.episodes[key] = Episode(key if known is None else known.start, ts)
            else:
                self.episodes[key] = Episode(ts, None if known is None else known.end)
        elif kind == "transition" and row.get("event") == "overfull":
            self.stops.append(Stop(ts, tuple(
                (p["producer"], p.get("class"), int(p.get("messages") or 0),
                 float(p.get("share") or 0.0)) for p in row.get("topProducers") or ())))
        elif kind == "settings" and (row.get("producerClasses") or row.get("pacing")):
            self.enabled.append(ts)

    @property
    def weight(self) -> int:
        return len(self.stops) + len(self.episodes)


def lead_times(episodes: Iterable[Episode], stops: Sequence[float]
               ) -> tuple[list[float | None], int]:
    """Per episode (by start), the lead time to the first stop inside it, or None (a false
    warning); and how many stops no episode covered."""
    moments = sorted(stops)
    leads: list[float | None] = []
    covered = upto = 0  # stops covered so far; the index below which all are counted
    for episode in sorted(episodes, key=lambda e: e.start):
        lo = bisect.bisect_left(moments, episode.start)
        hi = len(moments) if episode.end is None else bisect.bisect_right(moments, episode.end)
        leads.append(moments[lo] - episode.start if lo < hi else None)
        covered += max(0, hi - max(lo, upto))
        upto = max(upto, hi)
    return leads, len(moments) - covered


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank q-quantile (0 < q <= 1) of `values`; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def flapping(hours: Iterable[tuple[float, float, int]], enabled_at: float | None
             ) -> tuple[float | None, float | None]:
    """Stops per observed hour before and after `enabled_at`, from (hour start, observed
    seconds, stops) rows; None where no hour was observed."""
    sums = {"before": [0.0, 0], "after": [0.0, 0]}
    for start, observed, stops in hours:
        if enabled_at is None or start + HOUR <= enabled_at:
            side = "before"
        elif start >= enabled_at:
            side = "after"
        else:
            continue  # the hour it was enabled in
        sums[side][0] += observed
        sums[side][1] += stops
    before, after = ((n * HOUR / seconds if seconds > 0 else None)
                     for seconds, n in (sums["before"], sums["after"]))
    return before, after


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def queue_row(queue: Queue, rows: QueueRows, hours: Iterable[tuple[float, float, int]]
              ) -> dict[str, Any]:
    """One row of graded.csv for the queue."""
    leads, unwarned = lead_times(rows.episodes.values(), [s.at for s in rows.stops])
    followed = [lead for lead in leads if lead is not None]
    enabled_at = min(rows.enabled) if rows.enabled else None
    before, after = flapping(hours, enabled_at)
    return {
        "vhost": queue[0], "queue": queue[1], "warnings": len(leads),
        "warnedStops": len(followed), "falseWarnings": len(leads) - len(followed),
        "falseWarningShare": _rounded((len(leads) - len(followed)) / len(leads))
        if leads else None,
        "stops": len(rows.stops), "stopsWithoutWarning": unwarned,
        "leadP50Seconds": _rounded(percentile(followed, 0.5)),
        "leadP10Seconds": _rounded(percentile(followed, 0.1)),
        "enabledAt": enabled_at, "stopsPerHourBefore": _rounded(before),
        "stopsPerHourAfter": _rounded(after),
    }


def producers_text(top: Sequence[tuple[str, str | None, int, float]]) -> str:
    """A stop's top producers in one cell: `batch-7 [bulk] 6000 (57%); importer ...`."""
    return "; ".join(f"{p}{'' if c is None else f' [{c}]'} {n} ({share:.0%})"
                     for p, c, n, share in top)


def stop_rows(queue: Queue, rows: QueueRows) -> list[dict[str, Any]]:
    """The rows of stops.csv for the queue: each stop, the lead time of the warning
    episode it fell in (empty: none), and who filled the queue."""
    episodes = sorted(rows.episodes.values(), key=lambda e: e.start)
    starts = [e.start for e in episodes]
    out = []
    for stop in sorted(rows.stops, key=lambda s: s.at):
        i = bisect.bisect_right(starts, stop.at) - 1  # the last episode started by then
        end = episodes[i].end if i >= 0 else None
        warned = episodes[i] if i >= 0 and (end is None or stop.at <= end) else None
        out.append({"vhost": queue[0], "queue": queue[1], "start": stop.at,
                    "leadSeconds": None if warned is None else _rounded(stop.at - warned.start),
                    "topProducer": stop.top[0][0] if stop.top else None,
                    "topProducers": producers_text(stop.top)})
    return out


def chosen(by_source: dict[str, QueueRows]) -> QueueRows:
    """The rows of the source that recorded the most of the queue (ties: the first name)."""
    return max(sorted(by_source.items()), key=lambda item: item[1].weight)[1]
