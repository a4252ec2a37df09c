"""Spark SQL settings sized to one run: few, large jobs, and shuffles fitted to the input.

Adaptive query execution re-plans a query at each shuffle, and does so by running each
shuffle stage as a Spark job of its own: a run was 18 jobs on 1,000 samples and 31 on
1M, most of them tiny, each with its fixed cost (scheduling, a round trip to Python; up
to seconds on a loaded machine). What adaptive execution buys here can be decided before
the run: the listing says about how many records it reads (`pipeline/layout.py`), and
every table after the timeline is small. So a run turns it off and sizes the shuffle
partitions from that estimate instead: a multiple of the cores (no core idles in a last,
partial wave), each partition at most `RECORDS_PER_PARTITION` records, which sorts in
the memory a task gets from a 2 GiB driver on `local[2]`. Joins are not broadcast
either: a broadcast is a job of its own, and the joined tables (per queue, per episode)
are small enough to shuffle within the job that needs them. Each output is then one job.

The window functions over each queue's samples buffer a queue's rows of the run: beyond
Spark's default of 4,096 rows (a queue's 6 hours at a 5 s interval) that buffer spilled;
`WINDOW_ROWS` keeps a queue's rows in memory up to about a week of 5 s samples (tens of
MB a task). The cached timeline is kept uncompressed: building the compressed columns
cost a quarter of the sort stage's CPU, for a table that lives for one run
(docs/benchmarks.md#the-pipelines-jvm-and-spark-settings).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

RECORDS_PER_PARTITION = 2_000_000
WINDOW_ROWS = 100_000


def shuffle_partitions(records: int, cores: int) -> int:
    """Shuffle partitions for a run over about `records` records on `cores` cores."""
    cores = max(1, cores)
    return cores * max(1, math.ceil(records / (cores * RECORDS_PER_PARTITION)))


def settings(records: int, cores: int) -> dict[str, str]:
    """The session settings of a run over about `records` records on `cores` cores."""
    return {"spark.sql.adaptive.enabled": "false",
            "spark.sql.autoBroadcastJoinThreshold": "-1",
            "spark.sql.windowExec.buffer.in.memory.threshold": str(WINDOW_ROWS),
            "spark.sql.inMemoryColumnarStorage.compressed": "false",
            "spark.sql.shuffle.partitions": str(shuffle_partitions(records, cores))}


@contextmanager
def sized(spark: SparkSession, records: int) -> Iterator[None]:
    """Run the block with `settings` for `records` on this session's cores; the
    session's own values are back afterwards (a test's shared session, a notebook's)."""
    chosen = settings(records, spark.sparkContext.defaultParallelism)
    before: dict[str, str | None] = {key: spark.conf.get(key) for key in chosen}
    for key, value in chosen.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)
