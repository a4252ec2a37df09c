"""Flow episodes: every interval a queue spent flow stopped, from its samples.

An episode is what an operator asks about first: how long producers were held, how deep
the queue got, and how far it overshot the stop threshold before producers noticed (the
figure threshold recommendations are built on). Samples are turned into episodes with the
"gaps and islands" pattern: per queue, in time order, a sample that is ON after one that
was not starts an island; a running sum of those starts numbers the islands. A gap between
samples longer than `max_gap` (the sidecar was down, the queue deleted and declared again)
is not observed time: an episode ends at its last ON sample before such a gap, and an ON
sample after one starts a new episode.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from pipeline.load import KEY

DEFAULT_MAX_GAP = 60.0  # seconds; well above the recorder's default interval of 5 s


def non_negative(column: Column) -> Column:
    """max(column, 0), but null stays null (greatest() would turn null into 0)."""
    return F.when(column.isNotNull(), F.greatest(column, F.lit(0)))


def by_time() -> WindowSpec:
    """Each queue's samples in time order (built per call: a spec needs a live session)."""
    return Window.partitionBy(*KEY).orderBy("ts")


def with_neighbours(samples: DataFrame) -> DataFrame:
    """Add the queue's previous state and time (`prevStopped`, `prevTs`, null on its first
    sample) and the time of its next sample (`nextTs`, null on its last)."""
    return (samples.withColumn("prevStopped", F.lag("flowStopped").over(by_time()))
            .withColumn("prevTs", F.lag("ts").over(by_time()))
            .withColumn("nextTs", F.lead("ts").over(by_time())))


def numbered_starts(samples: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """Add `nextTs` and `episode`: how many episode starts the queue had up to this sample.
    A start is an ON sample after an OFF one, the first sample when it is ON, or an ON
    sample after a gap of more than `max_gap` seconds."""
    started = F.col("flowStopped") & (~F.coalesce("prevStopped", F.lit(False))
                                      | (F.col("ts") - F.col("prevTs") > max_gap))
    return samples.transform(with_neighbours).withColumn(
        "episode", F.sum(started.cast("long")).over(
            by_time().rowsBetween(Window.unboundedPreceding, Window.currentRow)))


def episodes(samples: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """One row per queue and ON interval.

    start: time of its first ON sample; end: time of the first OFF sample after it, or of
    its last ON sample when a gap of more than `max_gap` follows; null while the episode
    is still open at the end of the data (then `durationSeconds` runs to the last ON
    sample). Peaks are the largest depths seen while ON; overshoot is the
    largest depth above the stop threshold in force at that sample (null when that
    dimension had no threshold). stopCount/stopSize are the thresholds at the start.
    """
    on = samples.transform(numbered_starts, max_gap).filter("flowStopped")
    following, last_on = F.col("following"), F.col("lastOn")
    return (on.groupBy(*KEY, "episode")
            .agg(F.min("ts").alias("start"),
                 F.max_by("nextTs", "ts").alias("following"),
                 F.max("ts").alias("lastOn"),
                 F.count(F.lit(1)).alias("samples"),
                 F.max("messages").alias("peakMessages"),
                 F.max("bytes").alias("peakBytes"),
                 F.min_by("stopCount", "ts").alias("stopCount"),
                 F.min_by("stopSize", "ts").alias("stopSize"),
                 non_negative(F.max(F.col("messages") - F.col("stopCount")))
                 .alias("overshootMessages"),
                 non_negative(F.max(F.col("bytes") - F.col("stopSize"))).alias("overshootBytes"))
            .withColumn("end", F.when(following - last_on > max_gap, last_on)
                        .otherwise(following))
            .select(*KEY, "episode", "start", "end",
                    F.col("end").isNull().alias("open"),
                    (F.coalesce("end", "lastOn") - F.col("start")).alias("durationSeconds"),
                    "samples", "peakMessages", "peakBytes", "stopCount", "stopSize",
                    "overshootMessages", "overshootBytes"))
