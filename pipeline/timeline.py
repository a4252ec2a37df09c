"""Each queue's samples in time order, once: the one shuffle and sort every output shares.

Episodes, hourly summaries and the per-queue figures all need a sample's neighbours in
its queue's time order (the state before it, the time of the next sample). They are
computed here in one pass: one exchange by (source, vhost, queue), one sort by time, then
window functions that reuse that order (`explain()` shows a single Exchange and a single
Sort). The same pass drops a sample written twice and numbers each queue's episodes.

An incremental run continues where the last one stopped: `carry` holds each queue's last
sample from it, with the episode number it had; it goes in front of the new samples so
that their first neighbours and episode numbers are what a full run would give, but it is
flagged `carried` so that nothing counts it again.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from pipeline.load import SOURCE_KEY

# the sample fields the outputs use (the rest of a sample is not carried through the sort)
FIELDS = ("ts", "messages", "bytes", "flowStopped", "stopCount", "resumeCount", "stopSize",
          "resumeSize", "maxMessages", "maxBytes", "producerCapacity", "countSource",
          "sizeSource", "ring")
# what an incremental run carries over per queue: its last sample and episode number
CARRIED = (*FIELDS, "episode")


def by_time() -> WindowSpec:
    """Each queue's samples in time order, per source (built per call: a spec needs a
    live session)."""
    return Window.partitionBy(*SOURCE_KEY).orderBy("ts")


def _so_far(column: Column) -> Column:
    return column.over(by_time().rowsBetween(Window.unboundedPreceding, Window.currentRow))


def timeline(samples: DataFrame, max_gap: float, carry: DataFrame | None = None
             ) -> DataFrame:
    """`samples` (and `carry`) in queue and time order with, per sample: `carried`,
    `prevStopped` and `prevTs` (null on a queue's first sample), `nextTs` (null on its
    last) and `episode`: how many episodes the queue had started up to this sample. A
    start is an ON sample after an OFF one, the first sample when it is ON, or an ON
    sample more than `max_gap` seconds after the one before it."""
    rows = samples.select(*SOURCE_KEY, *FIELDS, F.lit(False).alias("carried"),
                          F.lit(None).cast("long").alias("episode"))
    if carry is not None:
        rows = rows.unionByName(carry.select(*SOURCE_KEY, *FIELDS,
                                             F.lit(True).alias("carried"), "episode"))
    once = (rows.withColumn("again", F.lag("ts").over(by_time()) == F.col("ts"))
            .filter(~F.coalesce("again", F.lit(False))).drop("again"))
    linked = (once.withColumn("prevStopped", F.lag("flowStopped").over(by_time()))
              .withColumn("prevTs", F.lag("ts").over(by_time()))
              .withColumn("nextTs", F.lead("ts").over(by_time())))
    started = (F.col("flowStopped") & ~F.col("carried")
               & (~F.coalesce("prevStopped", F.lit(False))
                  | (F.col("ts") - F.col("prevTs") > max_gap)))
    return linked.withColumn("episode", F.coalesce(
        _so_far(F.first("episode", ignorenulls=True)), F.lit(0))
        + _so_far(F.sum(started.cast("long"))))
