"""Flow episodes: every interval a queue spent flow stopped, from its samples.

An episode is what an operator asks about first: how long producers were held, how deep
the queue got, and how far it overshot the stop threshold before producers noticed (the
figure threshold recommendations are built on). Samples are turned into episodes with the
"gaps and islands" pattern: per queue, in time order, a sample that is ON after one that
was not starts an island; a running sum of those starts numbers the islands.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from pipeline.load import KEY


def non_negative(column: Column) -> Column:
    """max(column, 0), but null stays null (greatest() would turn null into 0)."""
    return F.when(column.isNotNull(), F.greatest(column, F.lit(0)))


def by_time() -> WindowSpec:
    """Each queue's samples in time order (built per call: a spec needs a live session)."""
    return Window.partitionBy(*KEY).orderBy("ts")


def with_neighbours(samples: DataFrame) -> DataFrame:
    """Add the queue's previous state (`prevStopped`, null on its first sample) and the
    time of its next sample (`nextTs`, null on its last)."""
    return (samples.withColumn("prevStopped", F.lag("flowStopped").over(by_time()))
            .withColumn("nextTs", F.lead("ts").over(by_time())))


def numbered_starts(samples: DataFrame) -> DataFrame:
    """Add `nextTs` and `episode`: how many OFF -> ON starts the queue had up to this
    sample (its first sample counts as a start when it is ON)."""
    started = F.col("flowStopped") & ~F.coalesce("prevStopped", F.lit(False))
    return samples.transform(with_neighbours).withColumn(
        "episode", F.sum(started.cast("long")).over(
            by_time().rowsBetween(Window.unboundedPreceding, Window.currentRow)))


def episodes(samples: DataFrame) -> DataFrame:
    """One row per queue and ON interval.

    start: time of its first ON sample; end: time of the first OFF sample after it, null
    while the episode is still open at the end of the data (then `durationSeconds` runs to
    the last ON sample). Peaks are the largest depths seen while ON; overshoot is the
    largest depth above the stop threshold in force at that sample (null when that
    dimension had no threshold). stopCount/stopSize are the thresholds at the start.
    """
    on = samples.transform(numbered_starts).filter("flowStopped")
    return (on.groupBy(*KEY, "episode")
            .agg(F.min("ts").alias("start"),
                 F.max_by("nextTs", "ts").alias("end"),
                 F.max("ts").alias("lastOn"),
                 F.count(F.lit(1)).alias("samples"),
                 F.max("messages").alias("peakMessages"),
                 F.max("bytes").alias("peakBytes"),
                 F.min_by("stopCount", "ts").alias("stopCount"),
                 F.min_by("stopSize", "ts").alias("stopSize"),
                 non_negative(F.max(F.col("messages") - F.col("stopCount")))
                 .alias("overshootMessages"),
                 non_negative(F.max(F.col("bytes") - F.col("stopSize"))).alias("overshootBytes"))
            .select(*KEY, "episode", "start", "end",
                    F.col("end").isNull().alias("open"),
                    (F.coalesce("end", "lastOn") - F.col("start")).alias("durationSeconds"),
                    "samples", "peakMessages", "peakBytes", "stopCount", "stopSize",
                    "overshootMessages", "overshootBytes"))
