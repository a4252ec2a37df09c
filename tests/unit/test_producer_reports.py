"""Producer reports (`X-Producer-Published`): dated counts, rates, sums, bounded memory."""

from __future__ import annotations

import pytest

from sidecar.records.top_producers import Kind
from sidecar.signals.producer_reports import ProducerReports

Q = ("/", "orders")


def fed(reports: ProducerReports, producer: str, rate: float, start: float, end: float,
        every: float = 1.0, base: int = 0) -> None:
    """Reports of a producer sending `rate` messages/s from `start` to `end`."""
    t = start
    while t <= end + 1e-9:
        reports.record(Q, producer, base + round(rate * (t - start)), t)
        t += every


def test_reported_rate_is_the_slope_over_the_window() -> None:
    reports = ProducerReports()
    fed(reports, "a", 50, 100, 130)
    assert reports.reported_rate(Q, "a", 130, 10) == pytest.approx(50)
    assert reports.reported_rate(Q, "b", 130, 10) is None
    assert reports.reported_rate(Q, "a", 200, 10) is None  # silent over the window


def test_reports_closer_than_the_spacing_replace_the_newest() -> None:
    reports = ProducerReports(spacing=1.0)
    for i in range(100):  # ten requests a second
        reports.record(Q, "a", i * 10, 100 + i / 10)
    kept = reports._queues[Q]["a"].reports
    assert len(kept) <= 22 and kept[-1] == (100 + 99 / 10, 990)
    assert reports.reported_rate(Q, "a", 110, 20) == pytest.approx(100)


def test_published_counts_the_part_of_each_interval_inside_the_window() -> None:
    reports = ProducerReports()
    fed(reports, "a", 10, 0, 20, every=10)  # 0, 100, 200 at 0, 10, 20
    fed(reports, "b", 30, 5, 15, every=10)  # 0, 300 at 5, 15
    assert reports.published(Q, 5, 15) == pytest.approx(100 + 300)
    # each at its reports' rate over the span: a (10/s) and b (30/s) over 20 s
    assert reports.published(Q, 0, 20) == pytest.approx(200 + 600)
    assert reports.published(("/", "other"), 0, 100) == 0


def test_a_lower_count_starts_the_producer_afresh() -> None:
    reports = ProducerReports()
    fed(reports, "a", 10, 0, 10)
    reports.record(Q, "a", 5, 11)  # restarted
    assert reports.reported_rate(Q, "a", 11, 20) is None
    reports.record(Q, "a", 25, 13)
    assert reports.reported_rate(Q, "a", 13, 20) == pytest.approx(10)


def test_silent_producers_are_dropped_and_queues_capped() -> None:
    reports = ProducerReports(forget_after=60, sweep_every=10, per_queue=2)
    reports.record(Q, "a", 1, 0)
    reports.record(Q, "b", 1, 50)
    assert not reports.record(Q, "c", 1, 55)  # the cap
    reports.record(Q, "b", 2, 65)
    reports.on_poll(65)  # the poll sweeps: "a" silent for 65 s goes
    assert reports.producers(Q) == ["b"]
    assert reports.record(Q, "c", 1, 66)
    reports.on_poll(70)  # not due yet (every 10 s): nobody goes
    assert reports.producers(Q) == ["b", "c"]
    reports.record(("/", "x"), "d", 1, 200)
    reports.on_poll(200)  # sweeps every queue
    assert reports.producers(Q) == []


def test_events_say_who_published_what_between_two_moments() -> None:
    reports = ProducerReports()
    reports.record(Q, "a", 0, 10, producer_class="bulk")
    reports.record(Q, "a", 600, 70)
    reports.record(Q, "b", 7, 50)
    (event,) = reports.events(Q, 0, 100)
    assert (event.producer, event.producer_class, event.kind, event.messages,
            event.since, event.at) == ("a", "bulk", Kind.PUBLISHED, 600, 10, 70)
