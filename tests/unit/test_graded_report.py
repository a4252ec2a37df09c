"""The pipeline's graded-flow rules on plain rows (no Spark): warning episodes from their
records, lead times and false warnings, nearest-rank percentiles, flapping before and
after the enable moment, the replica chosen, and each stop's row."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.graded import (
    Episode,
    QueueRows,
    chosen,
    flapping,
    lead_times,
    percentile,
    queue_row,
    stop_rows,
)

Q = ("/", "orders")
T0 = 1795392000.0  # an hour's start


def warning(ts: float, started: float, cleared: bool = False) -> dict[str, Any]:
    return {"type": "warning", "ts": ts, "vhost": "/", "queue": "orders",
            "event": "warning-cleared" if cleared else "warning", "startedAt": started}


def stop(ts: float, *top: tuple[str, str | None, int, float]) -> dict[str, Any]:
    return {"type": "transition", "ts": ts, "event": "overfull", "topProducers": [
        {"producer": p, "class": c, "messages": n, "share": s} for p, c, n, s in top]}


def test_lead_times_false_warnings_and_unwarned_stops() -> None:
    """Episodes 0-40 (stops at 25 and 30), 100-130 (none: false), 200-open (stop at 260);
    the stop at 150 falls in no episode."""
    episodes = [Episode(100, 130), Episode(0, 40), Episode(200)]
    assert lead_times(episodes, [260, 150, 30, 25]) == ([25, None, 60], 1)
    assert lead_times([], [5.0]) == ([], 1)
    assert lead_times([Episode(0, 10)], []) == ([None], 0)
    # a stop exactly at either end of an episode is inside it
    assert lead_times([Episode(0, 10), Episode(10, 20)], [10]) == ([10, 0], 0)


def test_episodes_from_their_records_in_any_order() -> None:
    """The episode starts at its `warning` record's ts (after its startedAt: the statistics
    lag), ends at its `warning-cleared`; an end alone starts at startedAt."""
    rows = QueueRows()
    for record in (warning(T0 + 60, T0 + 0.5, cleared=True), warning(T0 + 2, T0 + 0.5),
                   warning(T0 + 200, T0 + 150, cleared=True), warning(T0 + 300, T0 + 299),
                   stop(T0 + 30, ("batch-7", "bulk", 60, 0.6), ("app", None, 40, 0.4)),
                   stop(T0 + 320), {"type": "transition", "ts": T0 + 40, "event": "underfull"},
                   {"type": "settings", "ts": T0 + 10, "producerClasses": {}},
                   {"type": "settings", "ts": T0 + 90, "pacing": True}):
        rows.add(record)
    assert sorted(rows.episodes.values(), key=lambda e: e.start) == [
        Episode(T0 + 2, T0 + 60), Episode(T0 + 150, T0 + 200), Episode(T0 + 300)]
    assert rows.enabled == [T0 + 90]  # classes removed is no enabling
    assert [s.at for s in rows.stops] == [T0 + 30, T0 + 320]
    assert stop_rows(Q, rows) == [
        {"vhost": "/", "queue": "orders", "start": T0 + 30, "leadSeconds": 28.0,
         "topProducer": "batch-7", "topProducers": "batch-7 [bulk] 60 (60%); app 40 (40%)"},
        {"vhost": "/", "queue": "orders", "start": T0 + 320, "leadSeconds": 20.0,
         "topProducer": None, "topProducers": ""}]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 0.5, None), ([7.0], 0.1, 7.0), ([4.0, 1.0, 3.0, 2.0], 0.5, 2.0),
    ([float(v) for v in range(1, 21)], 0.1, 2.0), ([float(v) for v in range(1, 21)], 0.5, 10.0),
    ([5.0, 50.0], 0.1, 5.0)])
def test_nearest_rank_percentiles(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_flapping_before_and_after_by_whole_hours() -> None:
    """Enabled at 02:30: hours 00 and 01 are before, 02 counts for neither, 03 after; stops
    per observed hour, a half-observed hour weighing half."""
    hours = [(T0, 3600.0, 40), (T0 + 3600, 1800.0, 20), (T0 + 7200, 3600.0, 30),
             (T0 + 10800, 3600.0, 6)]
    assert flapping(hours, T0 + 9000) == pytest.approx((40.0, 6.0))
    assert flapping(hours, None) == pytest.approx((96 / 3.5, None))  # never enabled
    assert flapping(hours, T0) == pytest.approx((None, 96 / 3.5))  # from the start
    assert flapping([(T0, 0.0, 0)], None) == (None, None)  # nothing observed


def test_a_queues_row_and_the_replica_chosen() -> None:
    a, b = QueueRows(), QueueRows()
    for record in (warning(T0 + 10, T0 + 10), stop(T0 + 40), warning(T0 + 60, T0 + 10, True),
                   warning(T0 + 100, T0 + 100), warning(T0 + 130, T0 + 100, True),
                   {"type": "settings", "ts": T0 + 3600, "pacing": True}, stop(T0 + 7300)):
        a.add(record)
    b.add(stop(T0 + 41))
    assert chosen({"replica-b": b, "replica-a": a}) is a
    row = queue_row(Q, chosen({"": a}), [(T0, 3600.0, 12), (T0 + 3600, 3600.0, 2)])
    assert row == {
        "vhost": "/", "queue": "orders", "warnings": 2, "warnedStops": 1, "falseWarnings": 1,
        "falseWarningShare": 0.5, "stops": 2, "stopsWithoutWarning": 1,
        "leadP50Seconds": 30.0, "leadP10Seconds": 30.0, "enabledAt": T0 + 3600,
        "stopsPerHourBefore": 12.0, "stopsPerHourAfter": 2.0}
