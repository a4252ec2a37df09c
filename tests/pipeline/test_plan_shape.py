"""The shape of a run's Spark work: a fixed, small number of jobs whatever the input, and
one shuffle and one sort of the samples, which every aggregate after them reuses. These
fail when a change adds a job per output again (a `count()` for a log line, a global sort,
a broadcast, adaptive execution) or a second shuffle of the samples."""

from __future__ import annotations

import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from pipeline import episodes, summary, synthetic
from pipeline.cli import JOB_GROUP, parse_args, run
from pipeline.load import classify, read_history, samples
from pipeline.timeline import timeline
from pipeline.tuning import sized

DOCS = Path(__file__).resolve().parents[2] / "docs" / "history.md"
# the jobs of a run, as docs/history.md states: input counts, the three tables, the chart,
# the graded-flow records
JOBS = 6


def plan(table: DataFrame) -> str:
    return str(table._jdf.queryExecution().executedPlan().toString())


def outside_cache(shape: str) -> str:
    """`shape` without the plans of the cached tables it reads (the subtrees below each
    InMemoryRelation): what running it computes itself."""
    kept: list[str] = []
    cached_at: int | None = None
    for line in shape.splitlines():
        depth = len(line) - len(line.lstrip(" :+-"))
        if cached_at is not None and depth > cached_at:
            continue
        cached_at = depth if "InMemoryRelation" in line else None
        kept.append(line)
    return "\n".join(kept)


# an exchange by the queue alone moves samples; one by queue and hour or episode, the
# aggregated (or an hour's last) rows
SAMPLE_SHUFFLE = re.compile(r"Exchange hashpartitioning\((?:(?!hour|episode)[^)])*\)")


def test_a_run_is_a_fixed_number_of_jobs(spark: SparkSession, tmp_path: Path) -> None:
    history = tmp_path / "history"
    synthetic.generate(history, 3, 900, seed=4)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(JOB_GROUP))
    assert run(spark, parse_args(["--history", str(history), "--out",
                                  str(tmp_path / "out")])) == 0
    jobs = set(tracker.getJobIdsForGroup(JOB_GROUP)) - before
    assert len((tmp_path / "out" / "episodes.csv").read_text().splitlines()) > 1
    assert len(jobs) <= JOBS
    assert f"{JOBS} Spark jobs" in DOCS.read_text()


def test_the_samples_are_shuffled_and_sorted_once(spark: SparkSession,
                                                  tmp_path: Path) -> None:
    history = tmp_path / "history"
    synthetic.generate(history, 3, 900, seed=4)
    records, estimate = read_history(spark, str(history))
    with sized(spark, estimate):
        line = timeline(records.transform(classify).transform(samples), 60.0)
        shape = plan(line)
        assert len(re.findall(r"Exchange hashpartitioning", shape)) == 1, shape
        assert len(re.findall(r"\bSort \[", shape)) == 1, shape
        # a run caches the timeline: what reads it shuffles no sample again
        line.persist()
        try:
            for partials in (episodes.partials(line), summary.partials(line)):
                shape = plan(partials)
                assert "InMemoryTableScan" in shape, shape
                assert not SAMPLE_SHUFFLE.search(outside_cache(shape)), shape
        finally:
            line.unpersist()
