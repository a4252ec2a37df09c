"""Per-queue, per-hour summaries, figures checked by hand."""

from __future__ import annotations

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from pipeline.load import classify, samples
from pipeline.summary import hourly_summary
from tests.pipeline.conftest import frame, sample

H = 1795392000.0  # 2026-11-23T00:00:00Z, an hour start


def summary_of(spark: SparkSession, rows: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    return frame(spark, rows).transform(classify).transform(samples).transform(hourly_summary)


def test_counts_shares_and_depths_per_hour(spark: SparkSession) -> None:
    rows = [sample(H + 0, 1, False, "a"),
            sample(H + 600, 30, True, "a"),      # OFF -> ON (gap of 600 s: unobserved)
            sample(H + 630, 40, True, "a"),      # 30 s ON
            sample(H + 660, 5, False, "a"),      # 30 s ON, then ON -> OFF
            sample(H + 690, 4, False, "a"),      # 30 s OFF; then a gap: unobserved
            sample(H + 3590, 25, True, "a"),     # OFF -> ON; 10 s ON in this hour...
            sample(H + 3610, 2, False, "a")]     # ...10 s in the next; ON -> OFF
    # hour H: 6 samples, 2 stops, 3 transitions, observed 30+30+30+10 = 100 s of which
    # 70 s stopped; depths 1,30,40,5,4,25: max 40, p95 40 (6 x 0.95 -> the 6th value).
    # hour H+1: the one sample at H+3610 and the 10 s that spilled over, all stopped.
    assertDataFrameEqual(summary_of(spark, rows), [
        Row(vhost="/", queue="a", hour=int(H), samples=6, flowStoppedCount=2, transitions=3,
            stoppedShare=0.7, observedSeconds=100.0, stoppedSeconds=70.0,
            maxMessages=40, p95Messages=40, maxBytes=400, p95Bytes=400),
        Row(vhost="/", queue="a", hour=int(H) + 3600, samples=1, flowStoppedCount=0,
            transitions=1, stoppedShare=1.0, observedSeconds=10.0, stoppedSeconds=10.0,
            maxMessages=2, p95Messages=2, maxBytes=20, p95Bytes=20),
    ])


def test_p95_of_twenty_samples_is_the_nineteenth(spark: SparkSession) -> None:
    rows = [sample(H + i, i, False, "p") for i in range(1, 21)]
    result = summary_of(spark, rows).select("samples", "maxMessages", "p95Messages",
                                            "stoppedShare", "observedSeconds", "transitions")
    assertDataFrameEqual(result, [Row(samples=20, maxMessages=20, p95Messages=19,
                                      stoppedShare=0.0, observedSeconds=19.0, transitions=0)])


def test_a_queue_seen_once_has_no_observed_time(spark: SparkSession) -> None:
    result = summary_of(spark, [sample(H, 7, True, "once")]).select(
        "samples", "flowStoppedCount", "stoppedShare", "observedSeconds")
    assertDataFrameEqual(result, [Row(samples=1, flowStoppedCount=0, stoppedShare=None,
                                      observedSeconds=0.0)])
