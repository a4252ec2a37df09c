"""Per-queue, per-hour summaries: how often and how long flow control held producers.

The hourly view is where flapping and chronic congestion show: a queue stopped 40 times an
hour needs a wider hysteresis gap, one stopped 90 % of the time needs consumers, not
thresholds. Time shares are weighted by time, not by sample: each sample's state holds
until the queue's next sample, split at hour boundaries; a gap longer than `max_gap`
(the sidecar was down) counts as unobserved rather than as the last state.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.episodes import DEFAULT_MAX_GAP, with_neighbours
from pipeline.load import KEY, count_where

HOUR = 3600


def hour_of(seconds: str) -> Column:
    """Start of the UTC hour of an epoch-seconds column, in epoch seconds."""
    return F.floor(F.col(seconds) / HOUR) * HOUR


def hourly_summary(samples: DataFrame, max_gap: float = DEFAULT_MAX_GAP) -> DataFrame:
    """One row per queue and UTC hour (`hour`: epoch seconds of its start).

    flowStoppedCount: OFF -> ON transitions seen in the hour (what Qpid's counter of the
    same name grew by); transitions: both directions. A queue's first sample is no
    transition. maxMessages/p95Messages and maxBytes/p95Bytes are over the hour's samples
    (p95 approximate, exact below 10,000 samples). stoppedShare = stoppedSeconds /
    observedSeconds, null when nothing was observed.
    """
    if not 0 < max_gap <= HOUR:
        raise ValueError(f"max_gap={max_gap} must be in (0, {HOUR}] seconds")
    timed = samples.transform(with_neighbours).withColumn("hour", hour_of("ts"))
    changed = F.col("prevStopped").isNotNull() & (F.col("prevStopped") != F.col("flowStopped"))
    counted = timed.groupBy(*KEY, "hour").agg(
        F.count(F.lit(1)).alias("samples"),
        count_where(changed & F.col("flowStopped")).alias("flowStoppedCount"),
        count_where(changed).alias("transitions"),
        F.max("messages").alias("maxMessages"),
        F.percentile_approx("messages", 0.95).alias("p95Messages"),
        F.max("bytes").alias("maxBytes"),
        F.percentile_approx("bytes", 0.95).alias("p95Bytes"),
    )
    # Each sample's state lasts until the next sample; split that interval by hour.
    covered = (timed
               .filter(F.col("nextTs").isNotNull() & (F.col("nextTs") - F.col("ts") <= max_gap))
               .withColumn("hour", F.explode(F.sequence(
                   hour_of("ts"), hour_of("nextTs"), F.lit(HOUR).cast("long"))))
               .withColumn("overlap", F.least(F.col("nextTs"), F.col("hour") + HOUR)
                           - F.greatest(F.col("ts"), F.col("hour")))
               .groupBy(*KEY, "hour")
               .agg(F.sum("overlap").alias("observedSeconds"),
                    F.sum(F.when(F.col("flowStopped"), F.col("overlap")).otherwise(0.0))
                    .alias("stoppedSeconds")))
    # Every hour an interval reaches holds the sample that ends it (max_gap <= 1 h), so a
    # left join loses nothing.
    joined = counted.join(covered, [*KEY, "hour"], "left")
    observed = F.coalesce("observedSeconds", F.lit(0.0))
    return joined.select(
        *KEY, "hour", "samples", "flowStoppedCount", "transitions",
        F.when(observed > 0, F.coalesce("stoppedSeconds", F.lit(0.0)) / observed)
        .alias("stoppedShare"),
        observed.alias("observedSeconds"),
        F.coalesce("stoppedSeconds", F.lit(0.0)).alias("stoppedSeconds"),
        "maxMessages", "p95Messages", "maxBytes", "p95Bytes",
    )
