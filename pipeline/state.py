"""What `flow-pipeline --since` keeps between runs: the merged partials and how far they go.

An incremental run reads the state, analyses only the whole hours after `until`, folds
them in and writes the state again. Each write goes to a new version directory; the
marker file naming the current version is replaced last, so a run that dies half way
leaves the previous state as it was. Older versions are deleted at the end of the next
run, once nothing reads them any more.

    <state>/current.json          {"version": "v1795395600-…", "until": 1795395600}
    <state>/v1795395600-…/quality, episodes, hours, queues      Parquet
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from pyspark.sql import SparkSession

from pipeline.analysis import Partials
from pipeline.files import Files

MARKER = "current.json"


@dataclass
class State:
    """The partials of every hour before `until` (epoch seconds)."""

    until: float
    partials: Partials
    version: str


def load(spark: SparkSession, uri: str) -> State | None:
    """The current state at `uri`, or None when no run has left one."""
    text = Files(spark, uri).read_text(f"{uri}/{MARKER}")
    if text is None:
        return None
    marker = json.loads(text)
    tables = {name: spark.read.parquet(f"{uri}/{marker['version']}/{name}")
              for name in ("quality", "episodes", "hours", "queues")}
    return State(float(marker["until"]), Partials(**tables), marker["version"])


def save(spark: SparkSession, uri: str, partials: Partials, until: float) -> State:
    """Write `partials` as the new current state and read it back (the tables the run
    goes on with then no longer depend on the previous state or on the samples)."""
    version = f"v{int(until)}-{uuid.uuid4().hex[:8]}"
    for name, table in partials.tables().items():
        table.write.option("compression", "zstd").parquet(f"{uri}/{version}/{name}")
    Files(spark, uri).write_text(f"{uri}/{MARKER}",
                                 json.dumps({"version": version, "until": until}))
    state = load(spark, uri)
    assert state is not None and state.version == version
    return state


def prune(spark: SparkSession, uri: str, keep: str) -> None:
    """Delete every version but `keep` (earlier runs', and those of runs that died)."""
    files = Files(spark, uri)
    for child in files.children(uri):
        if child.rstrip("/").rsplit("/", 1)[-1].startswith("v") and not child.endswith(keep):
            files.delete(child)
