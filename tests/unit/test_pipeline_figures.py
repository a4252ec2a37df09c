"""What the report lists and charts, folded from the tables' rows (pipeline/figures.py,
pure): the orders and limits the Spark queries they replace had, and a run's shuffle
sizing (pipeline/tuning.py)."""

from __future__ import annotations

from typing import Any

from pipeline.figures import Figures
from pipeline.tuning import RECORDS_PER_PARTITION, settings, shuffle_partitions


def episode(queue: str, start: str, seconds: float, peak: int | None = 10) -> dict[str, Any]:
    return {"vhost": "/", "queue": queue, "start": start, "durationSeconds": seconds,
            "peakMessages": peak}


def test_longest_episodes_and_the_queues_stopped_most_often() -> None:
    figures = Figures(longest_count=3)
    for row in (episode("a", "t1", 5.0), episode("a", "t2", 90.0, 40),
                episode("b", "t1", 90.0, None), episode("b", "t3", 0.0, 7),
                episode("c", "t1", 12.0, 99), episode("d", "t1", 90.0, 5),
                episode("d", "t2", 1.0, 50)):
        figures.episode(row)
    # longest first, ties by queue then start; only three kept
    assert [(r["queue"], r["start"]) for r in figures.longest()] == [
        ("a", "t2"), ("b", "t1"), ("d", "t1")]
    # most episodes first, then the deepest peak (a queue without one last), then name
    assert figures.top_queues(3) == [("/", "d"), ("/", "a"), ("/", "b")]
    # quarter-decade bins of durations above zero: 1 s, 5 s, 12 s and three of 90 s
    assert figures.durations() == [(0, 1), (2, 1), (4, 1), (7, 3)]


def test_busiest_hours_and_recommendations_listed() -> None:
    figures = Figures(recommendation_count=3, flapping_count=2)
    for queue, transitions in (("a", 3), ("a", 30), ("b", 0), ("c", 30), ("d", 4)):
        figures.hour({"vhost": "/", "queue": queue, "transitions": transitions})
    assert figures.flapping() == [(("/", "a"), 30), (("/", "c"), 30)]
    rows = [{"queue": q, "flag": flag, "changed": changed} for q, flag, changed in (
        ("a", None, True), ("b", None, False), ("c", "near-max", False), ("d", None, None),
        ("e", None, True), ("f", "overflowed", True), ("g", None, True))]
    for row in rows:
        figures.recommendation(row)
    # flagged first, then the ones that change something, each in table order
    assert [r["queue"] for r in figures.recommendations()] == ["c", "f", "a"]


def test_shuffles_are_a_multiple_of_the_cores_and_sized_to_the_records() -> None:
    assert shuffle_partitions(1_000, 2) == 2
    assert shuffle_partitions(2 * RECORDS_PER_PARTITION, 2) == 2
    assert shuffle_partitions(2 * RECORDS_PER_PARTITION + 1, 2) == 4
    assert shuffle_partitions(10_000_000, 2) == 6
    assert shuffle_partitions(0, 0) == 1
    assert settings(10_000_000, 2) == {"spark.sql.adaptive.enabled": "false",
                                       "spark.sql.autoBroadcastJoinThreshold": "-1",
                                       "spark.sql.windowExec.buffer.in.memory.threshold":
                                       "100000",
                                       "spark.sql.inMemoryColumnarStorage.compressed": "false",
                                       "spark.sql.shuffle.partitions": "6"}
