"""Per queue: its last sample, its peaks and its producers' capacity.

A recommendation starts from a queue's latest thresholds and maxima and its peaks; an
incremental run starts each queue's timeline from its last sample (the carry). Both are
this one small table, per source and queue, folded across runs like the other partials.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.load import KEY, SOURCE_KEY

THRESHOLDS = ("stopCount", "resumeCount", "stopSize", "resumeSize", "maxMessages",
              "maxBytes", "countSource", "sizeSource", "ring")


def _folded(parts: DataFrame) -> DataFrame:
    return parts.groupBy(*SOURCE_KEY).agg(
        F.max_by("last", "last.ts").alias("last"),
        *[F.max(c).alias(c) for c in ("peakMessages", "peakBytes", "producerCapacity")])


def partials(hours: DataFrame) -> DataFrame:
    """Per source and queue of `hours` (hourly partials, see `pipeline/summary.py`):
    `last` (its last sample and episode number), `peakMessages`, `peakBytes`,
    `producerCapacity` (the largest seen)."""
    return _folded(hours.withColumnRenamed("maxMessages", "peakMessages")
                   .withColumnRenamed("maxBytes", "peakBytes"))


def merged(parts: DataFrame) -> DataFrame:
    """Partials of the same queue from several runs folded into one row each."""
    return _folded(parts)


def carry(queues: DataFrame) -> DataFrame:
    """The last sample of each source's queue, as a timeline continues from it."""
    return queues.select(*SOURCE_KEY, "last.*")


def latest(queues: DataFrame) -> DataFrame:
    """Per queue, whichever replica recorded it: the thresholds and maxima of its latest
    sample, its peaks and the largest producers' capacity seen."""
    return queues.groupBy(*KEY).agg(
        F.max_by("last", "last.ts").alias("last"),
        F.max("peakMessages").alias("peakMessages"),
        F.max("peakBytes").alias("peakBytes"),
        F.max("producerCapacity").alias("producerCapacity"),
    ).select(*KEY, *[F.col(f"last.{c}").alias(c) for c in THRESHOLDS],
             "producerCapacity", "peakMessages", "peakBytes")
