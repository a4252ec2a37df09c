"""The graded-flow tables of a run: graded.csv (per queue: warning lead times, false
warnings, flapping before and after pacing or classes) and stops.csv (per stop: who filled
the queue), with the report's part of them.

The records they need (warnings, stops, settings changes) are a small part of the history:
one Spark job streams them to the driver (one partition: `toLocalIterator` then runs one
job), where `pipeline/graded.py` folds them per source and queue; the hours observed come
from the hourly summary's rows as they are written (`hour`), so flapping costs no job. An
incremental run sees the warnings, stops and settings changes of its own hours only.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import charts
from pipeline.graded import Queue, QueueRows, chosen, queue_row, stop_rows

GRADED_COLUMNS = ("vhost", "queue", "warnings", "warnedStops", "falseWarnings",
                  "falseWarningShare", "stops", "stopsWithoutWarning", "leadP50Seconds",
                  "leadP10Seconds", "enabledAt", "stopsPerHourBefore", "stopsPerHourAfter")
STOP_COLUMNS = ("vhost", "queue", "start", "leadSeconds", "topProducer", "topProducers")
HEADERS = ("queue", "warnings", "false", "lead p50 s", "lead p10 s", "stops",
           "unwarned stops", "enabled", "stops/h before", "stops/h after",
           "most often first")


def graded_records(classified: DataFrame) -> DataFrame:
    """The usable records the graded tables read: warnings, stops, settings changes."""
    kind = F.col("type")
    wanted = kind.isin("warning", "settings") | (
        (kind == "transition") & (F.col("event") == "overfull"))
    return classified.filter(F.col("problem").isNull() & wanted & F.col("ts").isNotNull()
                             ).select("source", "vhost", "queue", "type", "ts", "event",
                                      "startedAt", "topProducers", "producerClasses",
                                      "pacing")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _iso(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class Graded:
    """The graded rows of a run, per queue and source, and its queues' observed hours."""

    rows: dict[Queue, dict[str, QueueRows]] = field(default_factory=dict)
    hours: dict[Queue, list[tuple[float, float, int]]] = field(default_factory=dict)
    shown: int = 20  # queues in the report's table

    def gather(self, classified: DataFrame) -> None:
        """Stream the run's graded records to the driver (one Spark job) and fold them."""
        for row in graded_records(classified).repartition(1).toLocalIterator():
            record = row.asDict(recursive=True)
            queue = (record["vhost"], record["queue"])
            sources = self.rows.setdefault(queue, {})
            sources.setdefault(record["source"], QueueRows()).add(record)

    def hour(self, row: Any) -> None:
        """Fold one row of the hourly summary as written (`hour` as ISO text)."""
        queue = (row["vhost"], row["queue"])
        self.hours.setdefault(queue, []).append(
            (_epoch(row["hour"].rstrip("Z")), float(row["observedSeconds"] or 0.0),
             int(row["flowStoppedCount"] or 0)))

    def tables(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows of graded.csv (every queue with a warning, stop or setting in the run)
        and of stops.csv, in queue (and time) order."""
        per_queue, stops = [], []
        for queue in sorted(self.rows):
            rows = chosen(self.rows[queue])
            per_queue.append(queue_row(queue, rows, self.hours.get(queue, ())))
            stops.extend(stop_rows(queue, rows))
        return per_queue, stops

    def write(self, out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Write graded.csv and stops.csv (times as UTC ISO-8601); their rows."""
        per_queue, stops = self.tables()
        for name, columns, rows, times in (
                ("graded.csv", GRADED_COLUMNS, per_queue, ("enabledAt",)),
                ("stops.csv", STOP_COLUMNS, stops, ("start",))):
            with open(out / name, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(columns)
                for row in rows:
                    writer.writerow([_iso(row[c]) if c in times else
                                     "" if row[c] is None else row[c] for c in columns])
        return per_queue, stops

    def report_rows(self, per_queue: Sequence[dict[str, Any]],
                    stops: Sequence[dict[str, Any]]) -> list[list[object]]:
        """The report's table (HEADERS): the queues stopped most often, with their
        warnings' lead times, false warnings, flapping before and after, and the producer
        that topped most of their stops."""
        firsts: dict[Queue, dict[str, int]] = {}
        for stop in stops:
            if stop["topProducer"] is not None:
                named = firsts.setdefault((stop["vhost"], stop["queue"]), {})
                named[stop["topProducer"]] = named.get(stop["topProducer"], 0) + 1

        def first(queue: Queue) -> str:
            named = firsts.get(queue)
            if not named:
                return ""
            producer, count = min(named.items(), key=lambda item: (-item[1], item[0]))
            return f"{producer} ({count} of its stops)"

        ranked = sorted(per_queue, key=lambda r: (-r["stops"], -r["warnings"], r["vhost"],
                                                  r["queue"]))[:self.shown]
        return [[charts.label(r["vhost"], r["queue"]), r["warnings"], r["falseWarnings"],
                 r["leadP50Seconds"], r["leadP10Seconds"], r["stops"],
                 r["stopsWithoutWarning"], _iso(r["enabledAt"]) or "never",
                 r["stopsPerHourBefore"], r["stopsPerHourAfter"],
                 first((r["vhost"], r["queue"]))] for r in ranked]
