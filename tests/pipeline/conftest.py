"""One real SparkSession for the pipeline tests: local[2], two shuffle partitions, on
loopback. Rows are built from the same schema the jobs read, with the same defaults the
recorder leaves out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from pipeline.load import SCHEMA
from pipeline.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = spark_session("local[2]", app_name="flow-pipeline-tests", shuffle_partitions=2)
    yield session
    session.stop()


def sample(ts: float, messages: int, stopped: bool, queue: str = "q", **fields: Any
           ) -> dict[str, Any]:
    """One sample row as the recorder writes it (bytes = 10 per message by default)."""
    return {"type": "sample", "ts": float(ts), "vhost": "/", "queue": queue,
            "messages": messages, "bytes": fields.pop("bytes", messages * 10),
            "flowStopped": stopped, **fields}


def frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Rows as the reader returns them: every schema column, missing ones null, and the
    `source` (the replica's directory; "" for one sidecar's history)."""
    schema = StructType([*SCHEMA.fields, StructField("source", StringType())])
    names = schema.fieldNames()
    return spark.createDataFrame([tuple(r.get(n, "" if n == "source" else None) for n in names)
                                  for r in rows], schema)
