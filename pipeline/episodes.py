"""Flow episodes: every interval a queue spent flow stopped, from its samples.

An episode is what an operator asks about first: how long producers were held, how deep
the queue got, and how far it overshot the stop threshold before producers noticed (the
figure threshold recommendations are built on). Samples become episodes by "gaps and
islands": `pipeline/timeline.py` numbers each queue's episode starts in time order, and
the ON samples are grouped by that number. A gap between samples longer than `max_gap`
(the sidecar was down, the queue deleted and declared again) is not observed time: an
episode ends at its last ON sample before such a gap, and an ON sample after one starts a
new episode.

Episodes are built in three steps so that an incremental run gives what a full run does:
`partials` aggregates one run's samples, `merged` folds them into the earlier runs' (every
aggregate is a min, max, sum or "value at the latest time"), and `finished` turns the
merged aggregates into the table. It also merges what several replicas recorded of the
same queue: each replica's episodes are found on its own samples (interleaving them would
invent transitions), then episodes of one queue that overlap in time, from whichever
replica, are one episode: it starts at the first replica's start and ends at the end seen
last, and counts once.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.load import KEY, SOURCE_KEY
from pipeline.timeline import timeline

DEFAULT_MAX_GAP = 60.0  # seconds; well above the recorder's default interval of 5 s


def non_negative(column: Column) -> Column:
    """max(column, 0), but null stays null (greatest() would turn null into 0)."""
    return F.when(column.isNotNull(), F.greatest(column, F.lit(0)))


def partials(line: DataFrame) -> DataFrame:
    """Per source, queue and episode number, the aggregates of its ON samples in `line`
    (a timeline). A carried sample takes part (an episode it was in may go on, and its
    next sample is only known now) but does not count as a sample again."""
    return (line.filter("flowStopped").groupBy(*SOURCE_KEY, "episode")
            .agg(F.min("ts").alias("start"),
                 F.max("ts").alias("lastOn"),
                 F.max_by("nextTs", "ts").alias("following"),
                 F.sum(F.when(F.col("carried"), 0).otherwise(1)).alias("samples"),
                 F.max("messages").alias("peakMessages"),
                 F.max("bytes").alias("peakBytes"),
                 F.min_by("stopCount", "ts").alias("stopCount"),
                 F.min_by("stopSize", "ts").alias("stopSize"),
                 F.max(F.col("messages") - F.col("stopCount")).alias("aboveStopMessages"),
                 F.max(F.col("bytes") - F.col("stopSize")).alias("aboveStopBytes")))


def _folded() -> list[Column]:
    """The aggregates that fold episode rows into one, alike across runs and replicas."""
    return [F.sum("samples").alias("samples"),
            *[F.max(c).alias(c) for c in ("peakMessages", "peakBytes", "aboveStopMessages",
                                          "aboveStopBytes")],
            F.min_by("stopCount", "start").alias("stopCount"),
            F.min_by("stopSize", "start").alias("stopSize")]


def merged(parts: DataFrame) -> DataFrame:
    """Partials of the same episode (from several runs) folded into one row each."""
    # the sample after the episode's last ON one; equal lastOn: the run that knows it
    latest = F.struct("lastOn", F.coalesce("following", F.lit(-1.0)))
    return (parts.groupBy(*SOURCE_KEY, "episode")
            .agg(F.min("start").alias("start"),
                 F.max("lastOn").alias("lastOn"),
                 F.max_by("following", latest).alias("following"),
                 *_folded()))


def finished(episodes: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """One row per queue and ON interval, replicas' overlapping episodes as one.

    start: time of its first ON sample; end: time of the first OFF sample after it, or of
    its last ON sample when a gap of more than `max_gap` follows; null while the episode
    is still open at the end of the data (then `durationSeconds` runs to the last ON
    sample). Peaks are the largest depths seen while ON; overshoot is the largest depth
    above the stop threshold in force at that sample (null when that dimension had no
    threshold). stopCount/stopSize are the thresholds at the start.
    """
    following, last_on = F.col("following"), F.col("lastOn")
    ends = (episodes.withColumn("end", F.when(following - last_on > max_gap, last_on)
                                .otherwise(following))
            .withColumn("reach", F.coalesce("end", "lastOn")))
    in_order = Window.partitionBy(*KEY).orderBy("start", "source", "episode")
    before = F.max("reach").over(in_order.rowsBetween(Window.unboundedPreceding, -1))
    fresh = before.isNull() | (F.col("start") > before)
    islands = ends.withColumn("island", F.sum(fresh.cast("long")).over(
        in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    # the member seen last decides the end: open only if that replica still saw it ON
    last = F.struct("reach", F.col("end").isNotNull())
    return (islands.groupBy(*KEY, "island")
            .agg(F.min("start").alias("start"),
                 F.max_by("end", last).alias("end"),
                 F.max("reach").alias("reach"),
                 *_folded())
            .select(*KEY, F.col("island").alias("episode"), "start", "end",
                    F.col("end").isNull().alias("open"),
                    (F.col("reach") - F.col("start")).alias("durationSeconds"),
                    "samples", "peakMessages", "peakBytes", "stopCount", "stopSize",
                    non_negative(F.col("aboveStopMessages")).alias("overshootMessages"),
                    non_negative(F.col("aboveStopBytes")).alias("overshootBytes")))


def episodes(samples: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """The episodes of `samples` (usable samples with their source) in one go."""
    return finished(merged(partials(timeline(samples, max_gap))), max_gap)
