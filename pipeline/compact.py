"""`flow-pipeline compact`: each closed hour's JSON Lines become Parquet beside them.

The sidecar keeps writing plain JSON Lines (its install stays free of Spark and Arrow);
run this every hour (a timer, cron) to turn the hours it has finished into Parquet with
the columns of docs/history.md, sorted by queue and time, compressed with zstd: about a
fifteenth of the bytes and read many times faster. An hour is closed `CLOSED_AFTER`
seconds after it ends: the recorder writes within seconds, so later lines are not
expected (one that still came would be written to a JSON file the jobs then skip).

Crash safety: all hours are written to a hidden staging directory first, then each is
renamed into place (`date=…/hour=HH/`, complete once it is there: readers prefer it to the
JSON file), and only then is its JSON file deleted. A crash at any point leaves every
record readable exactly once.
"""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.files import Files, list_paths
from pipeline.layout import CLOSED_AFTER, HistoryPart, closed_json_hours, hour_directory
from pipeline.load import CORRUPT, FULL_SCHEMA

BATCH = 48  # hours per Spark job: a day's first compaction stays a few small plans


@dataclass
class Compacted:
    """What a compaction did: hours, records, bytes before and after."""

    hours: int = 0
    records: int = 0
    json_bytes: int = 0
    parquet_bytes: int = 0

    def line(self) -> str:
        if not self.hours:
            return "flow-pipeline compact: no closed hour to compact"
        per = self.parquet_bytes / max(self.records, 1)
        return (f"flow-pipeline compact: {self.hours} hours, {self.records:,} records: "
                f"{self.json_bytes:,} bytes of JSON Lines became {self.parquet_bytes:,} "
                f"bytes of Parquet ({per:.1f} bytes a record, "
                f"{self.json_bytes / max(self.parquet_bytes, 1):.1f}x smaller)")


def _hour_records(spark: SparkSession, part: HistoryPart, slot: int) -> DataFrame:
    return (spark.read.schema(FULL_SCHEMA).option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT).json(part.path)
            .withColumn("slot", F.lit(slot)))


def compact(spark: SparkSession, history: str, now: float | None = None,
            closed_after: float = CLOSED_AFTER) -> Compacted:
    """Compact every closed, not yet compacted JSON hour under `history`."""
    root, paths = list_paths(spark, history)
    files = Files(spark, root)
    todo = closed_json_hours(paths, root, (time.time() if now is None else now) - closed_after)
    done = Compacted()
    for first in range(0, len(todo), BATCH):
        batch = todo[first:first + BATCH]
        staging = f"{root}/_compacting-{uuid.uuid4().hex[:8]}"
        records = functools.reduce(DataFrame.unionByName, [
            _hour_records(spark, part, slot) for slot, part in enumerate(batch)])
        # one task per hour, rows in queue and time order: long runs that compress well
        (records.repartition("slot").sortWithinPartitions("slot", "vhost", "queue", "ts")
         .write.partitionBy("slot").option("compression", "zstd").parquet(staging))
        for slot, part in enumerate(batch):
            target, written = hour_directory(root, part), f"{staging}/slot={slot}"
            done.json_bytes += files.size(part.path)
            if files.exists(written):  # else the file held no record (blank lines): none lost
                files.rename(written, target)
                done.parquet_bytes += files.size(target)
            files.delete(part.path)
        files.delete(staging)
        done.hours += len(batch)
        hours = [d for d in (hour_directory(root, p) for p in batch) if files.exists(d)]
        done.records += spark.read.parquet(*hours).count() if hours else 0
    return done
