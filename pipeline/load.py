"""Reading recorded flow history, and telling good records from bad ones.

History files are appended by a live process and copied around by people: a crash leaves a
truncated last line, an editor or a partial copy leaves worse. The jobs must still run, and
say how much they could not use. So the input is read permissively with an explicit schema
(docs/history.md; nothing is inferred, which would cost a pass over the JSON); every record
is classified (`problem`: corrupt, missing field) and counted by `input_quality`, and only
sound samples go on, each (source, queue, time) once. Compacted hours are read from Parquet
with the same columns (a corrupt line keeps its text there too, so the counts do not change
when an hour is compacted); which files are read is decided by `pipeline/layout.py` from
one recursive listing through Hadoop's file system API, so any URI Spark reads works.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from pipeline.files import list_paths
from pipeline.layout import HistoryPart, estimated_records, to_read

CORRUPT = "_corrupt_record"
KEY = ("vhost", "queue")
# the same queue recorded by several replicas is kept apart until episodes are merged
SOURCE_KEY = ("source", *KEY)
# not `bytes`: null for queues whose byte count the broker does not report (streams)
REQUIRED = ("ts", "vhost", "queue", "messages", "flowStopped")
GRADED_FIELDS = (
    StructField("event", StringType()),
    StructField("startedAt", DoubleType()),
    StructField("topProducers", ArrayType(StructType([
        StructField("producer", StringType()), StructField("class", StringType()),
        StructField("messages", LongType()), StructField("share", DoubleType())]))),
    StructField("producerClasses", MapType(StringType(), DoubleType())),
    StructField("pacing", BooleanType()),
)
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
    # graded flow (pipeline/graded.py): transitions' and warnings' event, warnings' episode
    # start, a stop's top producers, settings changes
    *GRADED_FIELDS,
    StructField(CORRUPT, StringType()),
])
SAMPLE_COLUMNS = [f.name for f in SCHEMA.fields
                  if f.name not in ("type", CORRUPT, *(g.name for g in GRADED_FIELDS))]
# what compaction keeps: every field of docs/history.md, the transitions' own ones too
FULL_SCHEMA = StructType([*SCHEMA.fields[:-1], StructField("version", LongType()),
                          StructField("reason", StringType()), SCHEMA.fields[-1]])
# the record types a run reads; any other is counted and skipped
TYPES = ("sample", "transition", "warning", "settings")


def read_parts(spark: SparkSession, parts: list[HistoryPart]) -> DataFrame:
    """The records of `parts` with SCHEMA's columns and their `source`."""
    frames = []
    for source in sorted({p.source for p in parts}):
        jsons = [p.path for p in parts if p.source == source and not p.parquet]
        parquets = [p.path for p in parts if p.source == source and p.parquet]
        if jsons:
            frames.append(spark.read.schema(SCHEMA).option("mode", "PERMISSIVE")
                          .option("columnNameOfCorruptRecord", CORRUPT).json(jsons)
                          .withColumn("source", F.lit(source)))
        if parquets:
            frames.append(spark.read.schema(SCHEMA).parquet(*parquets)
                          .withColumn("source", F.lit(source)))
    if not frames:
        return spark.createDataFrame([], StructType(
            [*SCHEMA.fields, StructField("source", StringType())]))
    return functools.reduce(DataFrame.unionByName, frames)


def read_history(spark: SparkSession, path: str, since: float | None = None,
                 until: float | None = None) -> tuple[DataFrame, int]:
    """Every record under `path` (a file or a history directory, any URI Spark reads),
    parsed with SCHEMA, with its `source`; unparseable lines keep their text in
    `_corrupt_record`. `since`/`until` (epoch seconds) skip whole hours outside the window
    (see `within` for the rest). Also about how many records that is, from the listing
    (`pipeline/layout.py`): what the run's shuffles are sized by."""
    root, files = list_paths(spark, path)
    parts = to_read(files, root, since, until)
    return read_parts(spark, parts), estimated_records(files, root, parts)


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


def within(records: DataFrame, since: float | None = None,
           until: float | None = None) -> DataFrame:
    """Keep records with since <= ts < until (epoch seconds); records without a usable
    time stay, so that they are still counted as problems."""
    ts = F.col("ts")
    if since is not None:
        records = records.filter(ts.isNull() | (ts >= since))
    if until is not None:
        records = records.filter(ts.isNull() | (ts < until))
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
        count_where(problem.isNull() & (kind.isNull() | ~kind.isin(*TYPES)))
        .alias("otherType"),
    )


def samples(classified: DataFrame) -> DataFrame:
    """Usable samples with their source (a sample written twice is dropped later, by
    `pipeline/timeline.py`, in the pass that orders them)."""
    return (classified.filter((F.col("type") == "sample") & F.col("problem").isNull())
            .select("source", *SAMPLE_COLUMNS))
