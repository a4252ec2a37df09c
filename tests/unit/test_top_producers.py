"""Who filled it: the producers that published or were granted the most in the minute
before a stop, from dated reports and grants; ranking, windows, classes, and properties
(order does not matter, nothing counted twice, shares add up)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.records.top_producers import (
    Contribution,
    Kind,
    ProducerEvent,
    recent,
    top_producers,
)

Q = ("/", "orders")
OTHER = ("/", "audit")
P, G = Kind.PUBLISHED, Kind.GRANTED


def report(producer: str, messages: int, since: float, at: float,
           producer_class: str | None = None, queue: tuple[str, str] = Q) -> ProducerEvent:
    return ProducerEvent(queue, producer, producer_class, P, messages, at, since)


def granted(producer: str, messages: int, at: float,
            producer_class: str | None = None) -> ProducerEvent:
    return ProducerEvent(Q, producer, producer_class, G, messages, at)


def test_the_ranking_in_the_minute_before_the_stop() -> None:
    events = [
        report("batch-7", 6000, 40, 100, "bulk"),
        report("payments", 1500, 40, 100, "critical"),
        granted("importer", 2000, 90, "bulk"),
        granted("importer", 1000, 95, "bulk"),
        report("importer", 2500, 40, 100, "bulk"),  # reports too: the larger, not the sum
        report("batch-7", 9000, 0, 30, "bulk"),  # over 70 s before the stop: not counted
        report("audit", 9000, 40, 100, queue=OTHER),  # another queue
    ]
    got = top_producers(events, Q, stopped_at=100)
    assert [(c.producer, c.producer_class, c.messages) for c in got] == [
        ("batch-7", "bulk", 6000), ("importer", "bulk", 3000), ("payments", "critical", 1500)]
    assert got[1] == Contribution("importer", "bulk", 2500.0, 3000, 3000 / 10_500)
    assert sum(c.share for c in got) == pytest.approx(1)


def test_a_report_straddling_the_window_counts_in_proportion() -> None:
    got = top_producers([report("a", 1200, 20, 80)], Q, stopped_at=100)  # 40 - 80 inside
    assert got[0].published == pytest.approx(800)
    assert top_producers([report("a", 100, 101, 110)], Q, stopped_at=100) == []  # after
    assert top_producers([granted("a", 100, 40)], Q, stopped_at=100) == []  # exactly 60 s


def test_ties_rank_by_id_and_limit_cuts() -> None:
    events = [report(name, 100, 50, 90) for name in ("c", "a", "b")]
    assert [c.producer for c in top_producers(events, Q, 100)] == ["a", "b", "c"]
    assert [c.producer for c in top_producers(events, Q, 100, limit=2)] == ["a", "b"]


def test_the_class_is_the_newest_named() -> None:
    events = [report("a", 10, 50, 60, "standard"), report("a", 10, 60, 70, "bulk")]
    assert top_producers(events, Q, 100)[0].producer_class == "bulk"


def test_a_grant_names_no_class_and_keeps_the_one_its_reports_named() -> None:
    events = [report("a", 10, 50, 90, "bulk"), granted("a", 5, 95)]  # a grant after it
    assert top_producers(events, Q, 100)[0].producer_class == "bulk"


def test_recent_keeps_what_a_later_stop_may_count() -> None:
    events = [granted("a", 1, 39), granted("a", 1, 41)]
    assert recent(events, now=100) == (events[1],)


event_lists = st.lists(st.builds(
    ProducerEvent, st.just(Q), st.sampled_from("abcd"), st.sampled_from([None, "bulk"]),
    st.sampled_from([P, G]), st.integers(0, 1000), st.floats(0, 200),
    st.none() | st.floats(0, 200)), max_size=30)


@given(event_lists, st.randoms(use_true_random=False))
def test_order_does_not_matter_and_shares_add_up(events: list[ProducerEvent], rng) -> None:
    got = top_producers(events, Q, 150, limit=10)
    shuffled = list(events)
    rng.shuffle(shuffled)
    assert top_producers(shuffled, Q, 150, limit=10) == got
    assert [c.messages for c in got] == sorted((c.messages for c in got), reverse=True)
    assert all(c.messages <= sum(e.messages for e in events if e.producer == c.producer)
               for c in got)
    if got and sum(c.messages for c in got) > 0:
        assert sum(c.share for c in got) == pytest.approx(1)
