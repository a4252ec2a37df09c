"""Reading recorded flow history, and telling good records from bad ones.

History files are appended by a live process and copied around by people: a crash leaves a
truncated last line, an editor or a partial copy leaves worse. The jobs must still run, and
say how much they could not use. So the input is read permissively with an explicit schema
(docs/history.md); every record is classified (`problem`: corrupt, missing field) and
counted by `input_quality`, and only sound samples go on, each (queue, time) once.
"""

from __future__ import annotations

import functools
import operator
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT = "_corrupt_record"
KEY = ("vhost", "queue")
# not `bytes`: null for queues whose byte count the broker does not report (streams)
REQUIRED = ("ts", "vhost", "queue", "messages", "flowStopped")
SCHEMA = StructType([
    StructField("type", StringType()),
    StructField("ts", DoubleType()),
    StructField("vhost", StringType()),
    StructField("queue", StringType()),
    StructField("messages", LongType()),
    StructField("bytes", LongType()),
    StructField("flowStopped", BooleanType()),
    StructField("flowStoppedCount", LongType()),
    StructField("toldStopped", BooleanType()),
    StructField("stale", BooleanType()),
    StructField("stopCount", LongType()),
    StructField("resumeCount", LongType()),
    StructField("stopSize", LongType()),
    StructField("resumeSize", LongType()),
    StructField("maxMessages", LongType()),
    StructField("maxBytes", LongType()),
    StructField("publishRate", DoubleType()),
    StructField("deliverRate", DoubleType()),
    StructField("producerCapacity", LongType()),
    StructField("countSource", StringType()),
    StructField("sizeSource", StringType()),
    StructField("ring", BooleanType()),
    StructField(CORRUPT, StringType()),
])
SAMPLE_COLUMNS = [f.name for f in SCHEMA.fields if f.name not in ("type", CORRUPT)]


def read_history(spark: SparkSession, path: str, since: datetime | None = None,
                 until: datetime | None = None) -> DataFrame:
    """Every record under `path` (a file or a `date=` partitioned directory, any URI Spark
    reads), parsed with SCHEMA; unparseable lines keep their text in `_corrupt_record`.
    `since`/`until` skip whole date partitions outside the window (see `within`)."""
    records = (spark.read.schema(SCHEMA).option("mode", "PERMISSIVE")
               .option("columnNameOfCorruptRecord", CORRUPT).json(path))
    if "date" in records.columns:  # partition discovery found date=YYYY-MM-DD directories
        if since is not None:
            records = records.filter(F.col("date") >= F.lit(since.astimezone(UTC).date()))
        if until is not None:
            records = records.filter(F.col("date") <= F.lit(until.astimezone(UTC).date()))
        records = records.drop("date")
    return records


def _missing(names: tuple[str, ...]) -> Column:
    return functools.reduce(operator.or_, [F.col(n).isNull() for n in names])


def classify(records: DataFrame) -> DataFrame:
    """Add `problem`: 'corrupt' (not a JSON object of the schema's types), 'missing field'
    (a sample without one of REQUIRED), or null for a usable record."""
    return records.withColumn(
        "problem",
        F.when(F.col(CORRUPT).isNotNull(), F.lit("corrupt"))
        .when((F.col("type") == "sample") & _missing(REQUIRED), F.lit("missing field")),
    )


def within(records: DataFrame, since: datetime | None = None,
           until: datetime | None = None) -> DataFrame:
    """Keep records with since <= ts < until; records without a usable time stay, so that
    they are still counted as problems."""
    ts = F.col("ts")
    if since is not None:
        records = records.filter(ts.isNull() | (ts >= since.timestamp()))
    if until is not None:
        records = records.filter(ts.isNull() | (ts < until.timestamp()))
    return records


def count_where(condition: Column) -> Column:
    """Aggregate: how many rows meet `condition` (0, not null, when none do or there are
    no rows at all)."""
    return F.coalesce(F.sum(F.when(condition, 1).otherwise(0)), F.lit(0)).cast("long")


def input_quality(classified: DataFrame) -> DataFrame:
    """One row: how many records were read, of which kind, and how many were unusable."""
    problem, kind = F.col("problem"), F.col("type")
    return classified.agg(
        F.count(F.lit(1)).alias("records"),
        count_where(problem.isNull() & (kind == "sample")).alias("samples"),
        count_where(problem.isNull() & (kind == "transition")).alias("transitions"),
        count_where(problem == "corrupt").alias("corrupt"),
        count_where(problem == "missing field").alias("missingField"),
        count_where(problem.isNull() & (kind.isNull() | ~kind.isin("sample", "transition")))
        .alias("otherType"),
    )


def samples(classified: DataFrame) -> DataFrame:
    """Usable samples, one per queue and time (a sample written twice counts once),
    hash-partitioned by queue: the later per-queue windows then need no other shuffle."""
    return (classified.filter((F.col("type") == "sample") & F.col("problem").isNull())
            .select(*SAMPLE_COLUMNS)
            .repartition(*KEY)
            .dropDuplicates([*KEY, "ts"]))
