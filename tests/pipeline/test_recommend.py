"""Threshold recommendations: the arithmetic of pipeline/recommend.py, worked by hand."""

from __future__ import annotations

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from pipeline import queues
from pipeline import summary as hourly
from pipeline.load import classify, samples
from pipeline.recommend import recommendations
from pipeline.timeline import timeline
from tests.pipeline.conftest import frame, sample

EPISODES = "vhost string, queue string, overshootMessages long, overshootBytes long"
SUMMARY = "vhost string, queue string, transitions long"


def recommend(spark: SparkSession, rows: list[dict[str, object]],
              episodes: list[tuple[object, ...]], summary: list[tuple[object, ...]]
              ) -> DataFrame:
    line = timeline(frame(spark, rows).transform(classify).transform(samples), 60.0)
    latest = queues.latest(queues.merged(queues.partials(hourly.partials(line))))
    return recommendations(latest, spark.createDataFrame(episodes, EPISODES),
                           spark.createDataFrame(summary, SUMMARY))


def levels(result: DataFrame) -> tuple[int, int]:
    """(recommendedStop, recommendedResume) of the only row."""
    (row,) = result.collect()
    return row["recommendedStop"], row["recommendedResume"]


def test_stop_lowered_to_leave_the_larger_of_overshoot_and_capacity(
        spark: SparkSession) -> None:
    levels = {"stopCount": 900, "resumeCount": 800, "maxMessages": 1000}
    rows = [sample(0, 10, False, "big", producerCapacity=50, **levels),
            sample(5, 1000, True, "big", producerCapacity=50, **levels)]
    # p99 of overshoots 40, 60, 100 is 100 (> capacity 50): headroom 100.
    # ceiling floor(1000 x 0.95) = 950; 900 + 100 > 950, so stop = 950 - 100 = 850;
    # 3 transitions/h <= 12: no widening; the gap 900 - 800 = 100 scales with the stop to
    # ceil(100 x 850 / 900) = 95: resume 755. Peak 1000 = max.
    result = recommend(spark, rows, [("/", "big", 40, None), ("/", "big", 60, None),
                                     ("/", "big", 100, None)], [("/", "big", 3)])
    assertDataFrameEqual(result.drop("reason"), [Row(
        vhost="/", queue="big", dimension="count", maximum=1000, peak=1000, episodes=3,
        overshootP99=100, producerCapacity=50, headroom=100, peakTransitionsPerHour=3,
        currentStop=900, currentResume=800, recommendedStop=850, recommendedResume=755,
        changed=True, flag="overflowed")])
    reason = result.first()["reason"]  # type: ignore[index]
    assert reason.startswith("stop lowered from 900 to 850: 900 + headroom 100 exceeds 950 "
                             "(max 1000 less 5%)")
    assert "headroom 100 = max(p99 overshoot 100 over 3 episodes, producers' capacity 50)" \
        in reason
    assert "gap scaled with the stop from 100 to 95" in reason
    assert "the queue overflowed" in reason


def test_a_lowered_stop_keeps_its_resume_in_proportion(spark: SparkSession) -> None:
    rows = [sample(0, 10, False, "wide", stopCount=900, resumeCount=100, maxMessages=1000)]
    # headroom 450: stop 950 - 450 = 500; the gap 800 scales to ceil(800 x 500 / 900) =
    # 445, resume 55 (keeping the gap of 800 would leave a resume of 1).
    result = recommend(spark, rows, [("/", "wide", 450, None)], [("/", "wide", 2)])
    assert levels(result) == (500, 55)


def test_ring_queues_and_disabled_dimensions_get_no_recommendation(
        spark: SparkSession) -> None:
    rows = [sample(0, 990, False, "ring", maxMessages=1000, ring=True, countSource="none",
                   sizeSource="default", maxBytes=10_000),
            sample(0, 10, False, "off", maxMessages=1000, countSource="disabled",
                   sizeSource="disabled", maxBytes=10_000),
            sample(0, 10, False, "ring-set", maxMessages=1000, ring=True, stopCount=800,
                   resumeCount=700, countSource="api", sizeSource="none")]
    result = recommend(spark, rows, [], [])
    assertDataFrameEqual(
        result.select("queue", "dimension", "recommendedStop", "changed"),
        [Row(queue="ring", dimension="count", recommendedStop=None, changed=False),
         Row(queue="ring", dimension="size", recommendedStop=None, changed=False),
         Row(queue="off", dimension="count", recommendedStop=None, changed=False),
         Row(queue="off", dimension="size", recommendedStop=None, changed=False),
         Row(queue="ring-set", dimension="count", recommendedStop=800, changed=False)])
    reasons = {(r["queue"], r["dimension"]): r["reason"] for r in result.collect()}
    assert reasons[("ring", "count")].startswith("a RING queue (overflow drop-head)")
    assert "no room" not in reasons[("ring", "count")]
    assert reasons[("off", "size")].startswith("flow control is disabled in this dimension")


def test_flapping_widens_the_gap_only_where_episodes_happened(spark: SparkSession) -> None:
    levels = {"stopCount": 500, "resumeCount": 490, "maxMessages": 1000,
              "stopSize": 50_000, "resumeSize": 49_990, "maxBytes": 100_000}
    rows = [sample(0, 960, True, "flappy", **levels)]
    # count: headroom 20; 500 + 20 <= 950: stop kept. 30 transitions/h > 12: the gap of 10
    # becomes ceil(10 x 30 / 12) = 25, resume 475. Peak 960 >= 950: within 5 % of the max.
    # size: no episode went above its stop (no byte overshoot), so its gap stays 10.
    result = recommend(spark, rows, [("/", "flappy", 20, None)], [("/", "flappy", 7),
                                                                  ("/", "flappy", 30)])
    assertDataFrameEqual(
        result.select("dimension", "episodes", "recommendedStop", "recommendedResume",
                      "changed", "flag"),
        [Row(dimension="count", episodes=1, recommendedStop=500, recommendedResume=475,
             changed=True, flag="near-max"),
         Row(dimension="size", episodes=0, recommendedStop=50_000, recommendedResume=49_990,
             changed=False, flag=None)])
    reasons = dict(result.select("dimension", "reason").collect())  # type: ignore[arg-type]
    assert "30 transitions in the busiest hour > target 12: gap widened from 10 to 25" \
        in reasons["count"]
    assert "no episode went above this stop: gap 10 kept" in reasons["size"]


def test_widening_stops_at_half_the_stop(spark: SparkSession) -> None:
    rows = [sample(0, 10, False, "storm", stopCount=100, resumeCount=90, maxMessages=1000)]
    # ceil(10 x 240 / 12) = 200 > 100 / 2: the gap is capped at 50, resume 50.
    result = recommend(spark, rows, [("/", "storm", 5, None)], [("/", "storm", 240)])
    assert levels(result) == (100, 50)
    assert "needs consumers, not thresholds" in result.first()["reason"]  # type: ignore[index]


def test_queue_without_thresholds_gets_stop_and_default_gap_in_both_dimensions(
        spark: SparkSession) -> None:
    rows = [sample(0, 10, False, "fresh", maxMessages=100, maxBytes=1000)]
    # count: ceiling 95, nothing observed: stop 95, gap ceil(95 / 8) = 12, resume 83.
    # size: ceiling 950, stop 950, gap ceil(950 / 8) = 119, resume 831.
    result = recommend(spark, rows, [], [])
    assertDataFrameEqual(
        result.select("dimension", "headroom", "recommendedStop", "recommendedResume",
                      "changed", "flag"),
        [Row(dimension="count", headroom=0, recommendedStop=95, recommendedResume=83,
             changed=True, flag=None),
         Row(dimension="size", headroom=0, recommendedStop=950, recommendedResume=831,
             changed=True, flag=None)])


def test_unchanged_when_already_right_and_none_when_no_room(spark: SparkSession) -> None:
    rows = [sample(0, 1, False, "fine", stopCount=80, resumeCount=70, maxMessages=100),
            sample(0, 1, False, "tiny", maxMessages=10, producerCapacity=20),
            sample(0, 1, False, "unbounded")]
    result = recommend(spark, rows, [], [])
    assertDataFrameEqual(
        result.select("queue", "recommendedStop", "recommendedResume", "changed"),
        [Row(queue="fine", recommendedStop=80, recommendedResume=70, changed=False),
         Row(queue="tiny", recommendedStop=None, recommendedResume=None, changed=False)])
    tiny = result.filter("queue = 'tiny'").first()["reason"]  # type: ignore[index]
    assert tiny.startswith("max 10 less 5% leaves no room for headroom 20")
