"""One run of the analysis: records in, the merged partial aggregates and the tables out.

A full run and an incremental one are the same code: a full run merges into nothing. Each
run builds the timeline of its samples once (cached: all three partials and the depth
chart read it, and it is the expensive part: one shuffle and one sort of every sample),
aggregates it into partials, folds them into the previous run's partials, and finishes the
tables from the result, which is small (per episode, per queue-hour, per queue). The
run's hourly partials are cached too: the summary and the per-queue figures both read
them, and they are the costliest aggregate (each sample split at the hour, percentiles).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import episodes, queues, summary
from pipeline.load import input_quality, samples
from pipeline.recommend import recommendations
from pipeline.timeline import timeline

QUALITY = ("records", "samples", "transitions", "corrupt", "missingField", "otherType")


@dataclass
class Partials:
    """What runs add up: input counts, and per-source episode, queue-hour and queue
    aggregates. Each table can be folded with another run's by its module's `merged`."""

    quality: DataFrame
    episodes: DataFrame
    hours: DataFrame
    queues: DataFrame

    def tables(self) -> dict[str, DataFrame]:
        return {"quality": self.quality, "episodes": self.episodes, "hours": self.hours,
                "queues": self.queues}

    def unpersist(self) -> None:
        for table in self.tables().values():
            table.unpersist()


@dataclass
class Analysed:
    """A run's merged partials, its timeline, and what it persisted (for the caller to
    unpersist once the report is drawn: the timeline and the hourly partials)."""

    partials: Partials
    timeline: DataFrame
    cached: tuple[DataFrame, ...]


@dataclass
class Outputs:
    """The finished tables of a run."""

    episodes: DataFrame
    summary: DataFrame
    recommendations: DataFrame


def analyse(classified: DataFrame, previous: Partials | None, max_gap: float) -> Analysed:
    """The partials of `classified` records folded into `previous`, and the run's
    timeline."""
    carry = queues.carry(previous.queues) if previous else None
    line = timeline(classified.transform(samples), max_gap, carry).persist(
        StorageLevel.MEMORY_AND_DISK)
    hours = summary.partials(line, max_gap).persist(StorageLevel.MEMORY_AND_DISK)
    new = Partials(classified.transform(input_quality), episodes.partials(line), hours,
                   queues.partials(hours))

    def fold(name: str) -> DataFrame:
        table = new.tables()[name]
        return table if previous is None else table.unionByName(previous.tables()[name])

    quality = fold("quality").agg(*[F.sum(c).cast("long").alias(c) for c in QUALITY])
    merged = Partials(quality, episodes.merged(fold("episodes")),
                      summary.merged(fold("hours")), queues.merged(fold("queues")))
    return Analysed(merged, line, (line, hours))


def outputs(partials: Partials, max_gap: float, margin: float, target: float) -> Outputs:
    """The tables from merged partials."""
    found = episodes.finished(partials.episodes, max_gap)
    hourly = summary.finished(partials.hours)
    advice = recommendations(queues.latest(partials.queues), found, hourly, margin, target)
    return Outputs(found, hourly, advice)
