"""Samples to flow episodes (gaps and islands), on small inline rows."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from pipeline.episodes import episodes
from pipeline.load import classify, samples
from tests.pipeline.conftest import frame, sample

MIDNIGHT = datetime(2026, 11, 23, tzinfo=UTC).timestamp()
LEVELS = {"stopCount": 20, "resumeCount": 10}


def episodes_of(spark: SparkSession, rows: list[dict[str, object]]) -> DataFrame:
    return frame(spark, rows).transform(classify).transform(samples).transform(episodes)


def episode(queue: str, n: int, start: float, end: float | None, duration: float, count: int,
            peak: int, overshoot: int | None, stop: int | None = 20) -> Row:
    return Row(vhost="/", queue=queue, episode=n, start=start, end=end, open=end is None,
               durationSeconds=duration, samples=count, peakMessages=peak,
               peakBytes=peak * 10, stopCount=stop, stopSize=None,
               overshootMessages=overshoot, overshootBytes=None)


def test_closed_and_open_episodes_from_shuffled_and_duplicated_samples(
        spark: SparkSession) -> None:
    rows = [sample(0, 5, False, "a", **LEVELS),
            sample(10, 25, True, "a", **LEVELS),
            sample(20, 30, True, "a", **LEVELS),
            sample(20, 30, True, "a", **LEVELS),   # written twice
            sample(30, 8, False, "a", **LEVELS),
            sample(40, 22, True, "a", **LEVELS),
            sample(50, 21, True, "a", **LEVELS)]   # still ON when the data ends
    random.Random(7).shuffle(rows)
    assertDataFrameEqual(episodes_of(spark, rows), [
        episode("a", 1, 10.0, 30.0, 20.0, 2, 30, 10),
        episode("a", 2, 40.0, None, 10.0, 2, 22, 2),
    ])


def test_an_episode_spanning_midnight_is_one_episode(spark: SparkSession) -> None:
    rows = [sample(MIDNIGHT - 20, 3, False, "m", **LEVELS),
            sample(MIDNIGHT - 10, 24, True, "m", **LEVELS),
            sample(MIDNIGHT + 5, 26, True, "m", **LEVELS),
            sample(MIDNIGHT + 20, 9, False, "m", **LEVELS)]
    assertDataFrameEqual(episodes_of(spark, rows), [
        episode("m", 1, MIDNIGHT - 10, MIDNIGHT + 20, 30.0, 2, 26, 6)])


def test_first_sample_on_starts_an_episode_and_overshoot_needs_a_threshold(
        spark: SparkSession) -> None:
    rows = [sample(100, 50, True, "s", stopSize=400, resumeSize=300),  # size-triggered
            sample(105, 1, False, "s", stopSize=400, resumeSize=300)]
    result = episodes_of(spark, rows).select("episode", "start", "end", "overshootMessages",
                                             "overshootBytes", "stopCount", "stopSize")
    assertDataFrameEqual(result, [Row(episode=1, start=100.0, end=105.0, overshootMessages=None,
                                      overshootBytes=100, stopCount=None, stopSize=400)])


def test_a_gap_in_the_samples_ends_an_episode_at_its_last_on_sample(
        spark: SparkSession) -> None:
    """Deleted while stopped, declared again 50 minutes later: two short episodes, not one
    of 50 minutes (max gap 60 s)."""
    rows = [sample(0, 25, True, "g", **LEVELS), sample(10, 30, True, "g", **LEVELS),
            sample(3010, 24, True, "g", **LEVELS), sample(3020, 5, False, "g", **LEVELS),
            sample(3030, 21, True, "g", **LEVELS), sample(3040, 22, True, "g", **LEVELS),
            sample(6000, 0, False, "g", **LEVELS)]
    assertDataFrameEqual(episodes_of(spark, rows), [
        episode("g", 1, 0.0, 10.0, 10.0, 2, 30, 10),
        episode("g", 2, 3010.0, 3020.0, 10.0, 1, 24, 4),
        episode("g", 3, 3030.0, 3040.0, 10.0, 2, 22, 2),
    ])


def test_queues_and_vhosts_are_kept_apart(spark: SparkSession) -> None:
    rows = [sample(0, 25, True, "x", **LEVELS), sample(0, 25, True, "y", **LEVELS),
            {**sample(5, 0, False, "x", **LEVELS), "vhost": "other"}]
    result = episodes_of(spark, rows).select("vhost", "queue", "open")
    assertDataFrameEqual(result, [Row(vhost="/", queue="x", open=True),
                                  Row(vhost="/", queue="y", open=True)])
