"""Threshold recommendations from observed behaviour, each with the reason it was made.

Qpid's rule for a safe stop threshold is that messages still in flight when producers are
told to stop must fit under the queue's maximum: stop + overshoot <= max. The history
shows the overshoot that actually happened (p99 over the queue's episodes) and, where
producers identified themselves, their summed capacity (the seed's capacity window); the
larger of the two is the headroom. A stop that already leaves that headroom under
max x (1 - margin) is kept, a larger one is lowered. The hysteresis gap (stop - resume)
is kept unless the busiest hour saw more transitions than the target (in a dimension that
went above its stop at all), then it is widened in proportion: with producers and
consumers at steady rates a cycle lasts about as long as it takes to cross the gap, so
transitions per hour fall as the gap grows. The gap stops at half the stop: resuming
producers only once the queue is nearly empty would leave consumers idle.

Per queue and dimension (count, size) that has a maximum:
    ceiling   = floor(max x (1 - margin))
    headroom  = max(p99 overshoot of the episodes that went above this stop,
                    producers' capacity [count only]), 0 when none seen
    stop      = current stop if current stop + headroom <= ceiling else ceiling - headroom
    gap       = current stop - current resume, scaled with the stop when it is lowered:
                ceil(gap x stop / current stop) (no thresholds yet: ceil(stop / 8), qpidd's
                80 % / 70 % defaults); when flapping: ceil(max(gap, 1) x transitions /
                target), at most floor(stop / 2)
    resume    = max(stop - gap, 1)        (a resume of 0 would mean "= stop" to Qpid)
No recommendation when ceiling - headroom < 1, for a dimension the operator disabled
(stop 0) and for RING queues (overflow drop-head), which Qpid exempts. Flags: `overflowed`
when the peak depth reached the maximum, `near-max` when it came within 5 % of it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.load import KEY, count_where

NEAR_MAX = 0.05
DEFAULT_MARGIN = 0.05
DEFAULT_TARGET = 12.0
# (dimension, suffix of the threshold fields, suffix of the depth fields)
DIMENSIONS = (("count", "Count", "Messages"), ("size", "Size", "Bytes"))


def per_queue(latest: DataFrame, episodes: DataFrame, summary: DataFrame) -> DataFrame:
    """What each queue's recommendation rests on: its latest thresholds and maxima, peaks
    and producers' capacity (`latest`, see `pipeline/queues.py`), episode count, p99
    overshoot and its busiest hour's transitions."""
    # A dimension took part in an episode when its depth went above its stop (flow turns
    # on strictly above a stop, so the overshoot is then at least 1).
    overshoot = episodes.groupBy(*KEY).agg(*[
        agg for depth in ("Messages", "Bytes") for agg in (
            count_where(F.col(f"overshoot{depth}") > 0).alias(f"episodes{depth}"),
            F.percentile_approx(F.when(F.col(f"overshoot{depth}") > 0,
                                       F.col(f"overshoot{depth}")), 0.99)
            .alias(f"overshoot{depth}"))])
    flapping = summary.groupBy(*KEY).agg(F.max("transitions").alias("peakTransitionsPerHour"))
    return latest.join(overshoot, list(KEY), "left").join(flapping, list(KEY), "left")


def _dimension(queues: DataFrame, name: str, threshold: str, depth: str) -> DataFrame:
    capacity = F.col("producerCapacity") if name == "count" else F.lit(None).cast("long")
    return queues.select(
        *KEY, F.lit(name).alias("dimension"),
        F.col(f"max{depth}").alias("maximum"), F.col(f"peak{depth}").alias("peak"),
        F.coalesce(f"episodes{depth}", F.lit(0)).alias("episodes"),
        F.col(f"overshoot{depth}").alias("overshootP99"),
        capacity.alias("producerCapacity"),
        F.col(f"stop{threshold}").alias("currentStop"),
        F.col(f"resume{threshold}").alias("currentResume"),
        F.coalesce("peakTransitionsPerHour", F.lit(0)).alias("peakTransitionsPerHour"),
        F.coalesce(F.col(f"{name}Source") == "disabled", F.lit(False)).alias("disabled"),
        # a RING queue is left alone unless the operator set thresholds on it anyway
        (F.coalesce("ring", F.lit(False))
         & F.coalesce(F.col(f"{name}Source").isin("none", "default"), F.lit(True)))
        .alias("ring"),
    )


def _text(column: Column) -> Column:
    return F.coalesce(column.cast("string"), F.lit("none"))


def recommendations(latest: DataFrame, episodes: DataFrame, summary: DataFrame,
                    margin: float = DEFAULT_MARGIN,
                    target: float = DEFAULT_TARGET) -> DataFrame:
    """One row per queue and dimension with a maximum (see the module's rules), from the
    queues' latest figures (`pipeline/queues.py`), their episodes and hourly summary."""
    queues = per_queue(latest, episodes, summary)
    rows = (_dimension(queues, *DIMENSIONS[0]).unionByName(_dimension(queues, *DIMENSIONS[1]))
            .filter(F.col("maximum").isNotNull()))
    c = F.col
    less = f"less {margin * 100:g}%%"
    rows = (rows
            .withColumn("ceiling", F.floor(c("maximum") * (1 - margin)))
            .withColumn("headroom", F.greatest(F.coalesce("overshootP99", F.lit(0)),
                                               F.coalesce("producerCapacity", F.lit(0))))
            .withColumn("keeps", c("currentStop").isNotNull()
                        & (c("currentStop") + c("headroom") <= c("ceiling")))
            .withColumn("stop", F.when(c("keeps"), c("currentStop"))
                        .otherwise(c("ceiling") - c("headroom")))
            .withColumn("fits", (c("stop") >= 1) & ~c("disabled") & ~c("ring"))
            .withColumn("currentGap", c("currentStop") - c("currentResume"))
            .withColumn("baseGap", F.when(c("keeps"), c("currentGap"))
                        .when(c("currentStop").isNotNull(),
                              F.ceil(c("currentGap") * c("stop") / c("currentStop")))
                        .otherwise(F.ceil(c("stop") / 8)))
            .withColumn("flapping", (c("peakTransitionsPerHour") > target)
                        & (c("episodes") > 0))
            .withColumn("widened", F.ceil(
                F.greatest(c("baseGap"), F.lit(1)) * c("peakTransitionsPerHour") / target))
            .withColumn("capped", c("flapping") & (c("widened") > F.floor(c("stop") / 2)))
            .withColumn("gap", F.when(c("capped"), F.floor(c("stop") / 2))
                        .when(c("flapping"), c("widened")).otherwise(c("baseGap")))
            .withColumn("recommendedStop", F.when(c("fits"), c("stop")))
            .withColumn("recommendedResume",
                        F.when(c("fits"), F.greatest(c("stop") - c("gap"), F.lit(1))))
            .withColumn("flag", F.when(c("peak") >= c("maximum"), F.lit("overflowed"))
                        .when(c("peak") >= c("maximum") * (1 - NEAR_MAX), F.lit("near-max"))))
    stop_reason = (
        F.when(c("ring"), F.lit("a RING queue (overflow drop-head): Qpid gives it no flow "
                                "control, nothing recommended"))
        .when(c("disabled"), F.lit("flow control is disabled in this dimension (stop 0): "
                                   "nothing recommended"))
        .when(~c("fits"), F.format_string(
            f"max %d {less} leaves no room for headroom %d: add consumers or raise the max",
            "maximum", "headroom"))
        .when(c("currentStop").isNull(), F.format_string(
            f"no stop set: stop %d + headroom %d fits under %d (max %d {less})",
            "stop", "headroom", "ceiling", "maximum"))
        .when(c("keeps"), F.format_string(
            f"current stop %d + headroom %d = %d fits under %d (max %d {less}): kept",
            "currentStop", "headroom", c("currentStop") + c("headroom"), "ceiling", "maximum"))
        .otherwise(F.format_string(
            f"stop lowered from %d to %d: %d + headroom %d exceeds %d (max %d {less})",
            "currentStop", "stop", "currentStop", "headroom", "ceiling", "maximum")))
    headroom_reason = F.format_string(
        "headroom %d = max(p99 overshoot %s over %d episodes, producers' capacity %s)",
        "headroom", _text(c("overshootP99")), "episodes", _text(c("producerCapacity")))
    busiest = f"%d transitions in the busiest hour {{}} target {target:g}"
    gap_reason = (
        F.when(~c("fits"), F.lit(None))
        .when(c("capped"), F.format_string(
            busiest.format(">") + ": gap widened from %d to half the stop, %d; more would "
            "idle consumers: flapping this fast needs consumers, not thresholds",
            "peakTransitionsPerHour", "baseGap", "gap"))
        .when(c("flapping"), F.format_string(
            busiest.format(">") + ": gap widened from %d to %d",
            "peakTransitionsPerHour", "baseGap", "gap"))
        .when(c("currentStop").isNotNull() & ~c("keeps"), F.format_string(
            "gap scaled with the stop from %d to %d", "currentGap", "gap"))
        .when(c("episodes") == 0, F.format_string(
            "no episode went above this stop: gap %d kept", "gap"))
        .otherwise(F.format_string(busiest.format("<=") + ": gap %d kept",
                                   "peakTransitionsPerHour", "gap")))
    flag_reason = F.when(c("flag") == "overflowed", F.format_string(
        "peak %d reached the maximum %d: the queue overflowed", "peak", "maximum")).when(
        c("flag") == "near-max", F.format_string(
            f"peak %d came within {NEAR_MAX * 100:g}%% of the maximum %d", "peak", "maximum"))
    return rows.select(
        *KEY, "dimension", "maximum", "peak", "episodes", "overshootP99", "producerCapacity",
        "headroom", "peakTransitionsPerHour", "currentStop", "currentResume",
        "recommendedStop", "recommendedResume",
        (c("fits") & ~(c("recommendedStop").eqNullSafe(c("currentStop"))
                       & c("recommendedResume").eqNullSafe(c("currentResume"))))
        .alias("changed"),
        "flag",
        F.concat_ws("; ", stop_reason, headroom_reason, gap_reason, flag_reason).alias("reason"),
    )
