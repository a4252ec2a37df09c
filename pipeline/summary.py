"""Per-queue, per-hour summaries: how often and how long flow control held producers.

The hourly view is where flapping and chronic congestion show: a queue stopped 40 times an
hour needs a wider hysteresis gap, one stopped 90 % of the time needs consumers, not
thresholds. Time shares are weighted by time, not by sample: each sample's state holds
until the queue's next sample, split at hour boundaries; a gap longer than `max_gap`
(the sidecar was down) counts as unobserved rather than as the last state.

As for episodes, `partials` aggregates one run, `merged` folds runs together and
`finished` makes the table. Times are summed in whole milliseconds (the recorder's
precision), so that sums over one run or several are equal to the last digit. An hour is
summarised from one replica's samples: the one that observed most of it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.episodes import DEFAULT_MAX_GAP
from pipeline.load import KEY, SOURCE_KEY, count_where
from pipeline.timeline import CARRIED, timeline

HOUR = 3600
COUNTS = ("samples", "flowStoppedCount", "transitions", "observedMs", "stoppedMs")
PEAKS = ("maxMessages", "p95Messages", "maxBytes", "p95Bytes")


def hour_of(seconds: str | Column) -> Column:
    """Start of the UTC hour of an epoch-seconds column, in epoch seconds."""
    column = F.col(seconds) if isinstance(seconds, str) else seconds
    return F.floor(column / HOUR) * HOUR


def partials(line: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """Per source, queue and UTC hour, the aggregates of `line` (a timeline): one pass
    that splits each sample's interval at the hour and counts the sample in its own hour
    (a carried sample only adds the interval it now knows the end of). `last` (the hour's
    last sample) and `producerCapacity` are there for `pipeline/queues.py`, which needs
    no pass of its own over the samples then.

    flowStoppedCount: OFF -> ON transitions in the hour; transitions: both directions (a
    queue's first sample is none); p95 is approximate, exact below 10,000 samples an hour.

    Three aggregates over the (cached) timeline, joined per hour, rather than one: the
    sums and maxima compile to generated code, which no aggregate holding a percentile
    sketch or a struct does (Spark then interprets every aggregate of it, row by row: the
    most expensive stage of a large run). The percentiles read only the depths; the
    hour's last sample is the one row whose next sample is not in its hour.
    """
    if not 0 < max_gap <= HOUR:
        raise ValueError(f"max_gap={max_gap} must be in (0, {HOUR}] seconds")
    ts, until, key = F.col("ts"), F.col("until"), [*SOURCE_KEY, "hour"]
    seen = line.withColumn("until", F.when(
        F.col("nextTs") - ts <= max_gap, F.col("nextTs")))
    # an interval of at most an hour reaches at most the next hour
    split = seen.withColumn("hour", F.explode(F.sequence(
        hour_of(ts), hour_of(F.coalesce(until, ts)), F.lit(HOUR).cast("long"))))
    own = ~F.col("carried") & (F.col("hour") == hour_of(ts))
    changed = F.col("prevStopped").isNotNull() & (F.col("prevStopped") != F.col("flowStopped"))
    # (least and greatest skip nulls: an unobserved interval is tested for first)
    overlap = F.when(until.isNotNull(), F.round(
        (F.least(until, F.col("hour") + HOUR) - F.greatest(ts, F.col("hour"))) * 1000)
        .cast("long")).otherwise(F.lit(0).cast("long"))

    def mine(name: str) -> Column:
        return F.when(own, F.col(name))

    sums = split.groupBy(*key).agg(
        F.max("producerCapacity").alias("producerCapacity"),
        count_where(own).alias("samples"),
        count_where(own & changed & F.col("flowStopped")).alias("flowStoppedCount"),
        count_where(own & changed).alias("transitions"),
        F.sum(overlap).alias("observedMs"),
        F.sum(F.when(F.col("flowStopped"), overlap).otherwise(0)).alias("stoppedMs"),
        F.max(mine("messages")).alias("maxMessages"),
        F.max(mine("bytes")).alias("maxBytes"))
    p95 = (line.filter(~F.col("carried"))
           .select(*SOURCE_KEY, hour_of(ts).alias("hour"), "messages", "bytes")
           .groupBy(*key).agg(F.percentile_approx("messages", 0.95).alias("p95Messages"),
                              F.percentile_approx("bytes", 0.95).alias("p95Bytes")))
    # every hour of `split` holds its last sample: a sample's interval reaches into the
    # next hour only when the next sample is in it
    last = line.filter(F.col("nextTs").isNull() | (hour_of("nextTs") != hour_of(ts))).select(
        *SOURCE_KEY, hour_of(ts).alias("hour"), F.struct(*CARRIED).alias("last"))
    return sums.join(last, key).join(p95, key, "left").select(
        *key, "last", "producerCapacity", *COUNTS, *PEAKS)


def merged(parts: DataFrame) -> DataFrame:
    """Partials of the same hour folded together: an hour's samples are all in one run
    (runs take whole hours), only the interval of its last sample can come later."""
    return parts.groupBy(*SOURCE_KEY, "hour").agg(
        F.max_by("last", "last.ts").alias("last"), F.max("producerCapacity").alias(
            "producerCapacity"),
        *[F.sum(c).alias(c) for c in COUNTS], *[F.max(c).alias(c) for c in PEAKS])


def finished(hours: DataFrame) -> DataFrame:
    """One row per queue and UTC hour (`hour`: epoch seconds of its start), from the
    replica that observed most of it. stoppedShare = stoppedSeconds / observedSeconds,
    null when nothing was observed."""
    best = F.struct("observedMs", "samples", "source")
    one = (hours.groupBy(*KEY, "hour")
           .agg(F.max_by(F.struct(*COUNTS, *PEAKS), best).alias("best"))
           .select(*KEY, "hour", "best.*"))
    observed, stopped = F.col("observedMs"), F.col("stoppedMs")
    return one.filter(F.col("samples") > 0).select(
        *KEY, F.col("hour").cast("long").alias("hour"), "samples", "flowStoppedCount",
        "transitions", F.when(observed > 0, stopped / observed).alias("stoppedShare"),
        (observed / 1000).alias("observedSeconds"), (stopped / 1000).alias("stoppedSeconds"),
        *PEAKS)


def hourly_summary(samples: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """The hourly summary of `samples` (usable samples with their source) in one go."""
    return finished(merged(partials(timeline(samples, max_gap), max_gap)))
