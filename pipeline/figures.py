"""The report's lists and chart data, folded from the tables' rows as they are written.

Beyond the tables the report shows a few small summaries of them: the longest episodes,
the queues stopped most often, a histogram of episode durations, each queue's busiest
hour, and the recommendations that change something. Each was a Spark job of its own over
the finished tables (a fixed cost of a second or more a job on a loaded machine); the
driver streams every row of those tables to write the CSV files anyway, so here they are
folded from that stream in plain Python, and the report costs no Spark job but its depth
chart (which needs the samples). Memory stays bounded: one entry per queue at most.

Rows come as they are written (`pipeline/report.py`): time columns as ISO text, each table
in its CSV order.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Queue = tuple[str, str]


def _first(rows: list[tuple[Any, Any]], key: Any, row: Any, n: int) -> None:
    """Keep `rows` the n (key, row) pairs of smallest key seen, in key order."""
    if len(rows) < n or key < rows[-1][0]:
        bisect.insort(rows, (key, row), key=lambda pair: pair[0])
        del rows[n:]


def _descending(value: float | None) -> tuple[bool, float]:
    """A sort key for a descending order with nulls last, as Spark's `desc` sorts."""
    return (value is None, -(value or 0))


@dataclass
class Figures:
    """What the report needs from the episodes, summary and recommendations tables."""

    longest_count: int = 20
    recommendation_count: int = 25
    flapping_count: int = 15
    longest_rows: list[tuple[Any, Any]] = field(default_factory=list)
    episodes_per_queue: dict[Queue, tuple[int, int | None]] = field(default_factory=dict)
    duration_bins: Counter[int] = field(default_factory=Counter)
    busiest_hour: dict[Queue, int] = field(default_factory=dict)
    flagged: list[Any] = field(default_factory=list)
    changed: list[Any] = field(default_factory=list)

    def episode(self, row: Any) -> None:
        """Fold one row of the episodes table."""
        queue, duration, peak = (row["vhost"], row["queue"]), row["durationSeconds"], \
            row["peakMessages"]
        _first(self.longest_rows, (-duration, *queue, row["start"]), row, self.longest_count)
        count, deepest = self.episodes_per_queue.get(queue, (0, None))
        if peak is not None and (deepest is None or peak > deepest):
            deepest = peak
        self.episodes_per_queue[queue] = (count + 1, deepest)
        if duration > 0:
            self.duration_bins[math.floor(math.log10(duration) * 4)] += 1

    def hour(self, row: Any) -> None:
        """Fold one row of the hourly summary."""
        queue = (row["vhost"], row["queue"])
        self.busiest_hour[queue] = max(self.busiest_hour.get(queue, 0), row["transitions"])

    def recommendation(self, row: Any) -> None:
        """Fold one row of the recommendations (in CSV order: the first ones are kept)."""
        if row["flag"] is not None:
            if len(self.flagged) < self.recommendation_count:
                self.flagged.append(row)
        elif row["changed"] and len(self.changed) < self.recommendation_count:
            self.changed.append(row)

    def longest(self) -> list[Any]:
        """The longest episodes (then by queue and start)."""
        return [row for _, row in self.longest_rows]

    def top_queues(self, n: int) -> list[Queue]:
        """The n queues with the most episodes (then the deepest peak, then by name)."""
        ranked = sorted(self.episodes_per_queue.items(), key=lambda item: (
            -item[1][0], _descending(item[1][1]), item[0]))
        return [queue for queue, _ in ranked[:n]]

    def durations(self) -> list[tuple[int, int]]:
        """(bin, episodes) of the episode durations, quarter-decade bins, in order."""
        return sorted(self.duration_bins.items())

    def flapping(self) -> list[tuple[Queue, int]]:
        """The queues with the most transitions in their busiest hour (none without)."""
        busy = [(queue, peak) for queue, peak in self.busiest_hour.items() if peak > 0]
        return sorted(busy, key=lambda item: (-item[1], item[0]))[:self.flapping_count]

    def recommendations(self) -> Sequence[Any]:
        """Flagged recommendations first, then the ones that change something."""
        return (self.flagged + self.changed)[:self.recommendation_count]
