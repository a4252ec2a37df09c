"""Producer classes: validation naming the field, a class's thresholds and their rounding,
its machine (Qpid's, on the class's thresholds), what a producer is told, what it may be
granted; properties: a class never stops after the queue, nor resumes on a guess."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.producer_classes import (
    PRODUCER_CLASSES,
    class_problems,
    class_thresholds,
    grant_view,
    parse_classes,
    producer_flow,
    step_classes,
    thresholds_for,
)
from sidecar.flow.state_machine import EventKind, FlowState, step
from sidecar.model import Depth, Level, Thresholds
from sidecar.signals.grants import Ask, Destination, Ledger, grant

QUEUE = Thresholds(count=Level(1000, 800), size=Level(10_000, 7_000))
CLASSES = {"bulk": Fraction(3, 5), "standard": Fraction(17, 20)}


def test_classes_parse_exactly_as_written() -> None:
    assert parse_classes({"bulk": 0.6, "standard": 0.85, "critical": 1}) == (
        {"bulk": Fraction(3, 5), "standard": Fraction(17, 20), "critical": Fraction(1)}, [])
    assert parse_classes(None) == ({}, []) and parse_classes({}) == ({}, [])


@pytest.mark.parametrize(("value", "key", "words"), [
    ({"bulk": 0}, "producerClasses.bulk", "more than 0"),
    ({"bulk": 1.2}, "producerClasses.bulk", "at most 1"),
    ({"bulk": -0.5}, "producerClasses.bulk", "more than 0"),
    ({"bulk": "0.6"}, "producerClasses.bulk", "must be a number"),
    ({"bulk": True}, "producerClasses.bulk", "must be a number"),
    ({"bulk": float("inf")}, "producerClasses.bulk", "must be a number"),
    ({"": 0.5}, PRODUCER_CLASSES, "class name ''"),
    ({"bulk jobs": 0.5}, PRODUCER_CLASSES, "class name 'bulk jobs'"),
    ({"x" * 65: 0.5}, PRODUCER_CLASSES, "1 to 64"),
    ([0.6], PRODUCER_CLASSES, "must be an object"),
    ({f"c{i}": 0.5 for i in range(17)}, PRODUCER_CLASSES, "at most 16"),
])
def test_bad_classes_are_refused_naming_the_field(value: object, key: str, words: str) -> None:
    problems = class_problems(value)
    assert problems and problems[0].key == key
    assert key in problems[0].message and words in problems[0].message
    assert parse_classes(value)[0] == {}  # refused whole: nothing half-applied


@pytest.mark.parametrize(("fraction", "queue", "expected"), [
    (Fraction(3, 5), QUEUE, Thresholds(Level(600, 480), Level(6_000, 4_200))),
    (Fraction(17, 20), QUEUE, Thresholds(Level(850, 680), Level(8_500, 5_950))),
    (Fraction(1), QUEUE, QUEUE),
    (Fraction(29, 100), Thresholds(Level(10, 7)), Thresholds(Level(2, 2))),  # rounded down
    (Fraction(1, 100), Thresholds(Level(10, 7)), Thresholds(Level(1, 1))),  # at least 1
    (Fraction(3, 5), Thresholds(size=Level(999, 999)), Thresholds(size=Level(599, 599))),
    (Fraction(3, 5), Thresholds(), Thresholds()),
])
def test_class_thresholds(fraction: Fraction, queue: Thresholds, expected: Thresholds) -> None:
    assert class_thresholds(queue, fraction) == expected


def test_no_class_or_an_unknown_one_gets_the_queues_thresholds() -> None:
    assert thresholds_for(None, QUEUE, CLASSES) == QUEUE
    assert thresholds_for("batch", QUEUE, CLASSES) == QUEUE
    assert thresholds_for("bulk", QUEUE, CLASSES).count == Level(600, 480)


def test_a_class_stops_first_and_resumes_only_on_a_bound() -> None:
    states, events = step_classes({}, Depth(601, 0), Depth(601, 0), QUEUE, CLASSES)
    assert states["bulk"].stopped and not states["standard"].stopped
    assert [(name, e.kind) for name, e in events] == [("bulk", EventKind.OVERFULL)]
    # the newest depth is under bulk's resume but no bound says so: it stays stopped
    held, events = step_classes(states, Depth(100, 0), None, QUEUE, CLASSES)
    assert held["bulk"].stopped and events == ()
    freed, events = step_classes(states, Depth(100, 0), Depth(479, 0), QUEUE, CLASSES)
    assert not freed["bulk"].stopped and [e.kind for _, e in events] == [EventKind.UNDERFULL]


def test_classes_removed_are_dropped_and_new_ones_start_flowing() -> None:
    states, _ = step_classes({"old": FlowState(True, 4)}, Depth(0, 0), Depth(0, 0), QUEUE,
                             {"bulk": Fraction(3, 5)})
    assert states == {"bulk": FlowState()}


def test_what_a_producer_is_told() -> None:
    states = {"bulk": FlowState(True, 1), "standard": FlowState()}
    assert producer_flow("bulk", (), states).stopped_by == ("class:bulk",)
    assert not producer_flow("standard", (), states).stopped
    assert not producer_flow(None, (), states).stopped
    assert not producer_flow("batch", (), states).stopped  # unknown: the queue's own
    assert producer_flow("standard", ("queue",), states).stopped_by == ("queue",)
    both = producer_flow("bulk", ("queue", "broker-alarm"), states)
    assert both.stopped and both.stopped_by == ("queue", "broker-alarm", "class:bulk")


def test_a_class_is_granted_only_the_headroom_below_its_own_stop() -> None:
    states = {"bulk": FlowState(), "standard": FlowState()}
    asked = Ask("p1", 10_000, 100, lease=30)

    def granted(producer_class: str | None) -> int:
        thresholds, stopped = grant_view(producer_class, Thresholds(Level(1000, 800)), False,
                                         CLASSES, states)
        decision, _ = grant(Ledger(), asked, [Destination(
            ("/", "q"), thresholds, Depth(500, 0), 0.0, stopped)], "g1", 1.0, 10.0)
        return decision.messages

    assert (granted("bulk"), granted("standard"), granted(None)) == (100, 350, 500)
    states["bulk"] = FlowState(True, 1)
    assert granted("bulk") == 0 and granted("standard") == 350


fractions = st.fractions(min_value=Fraction(1, 1000), max_value=1)
levels = st.builds(lambda stop, gap: Level(stop, max(1, stop - gap)),
                   st.integers(1, 10**6), st.integers(0, 10**6))


@given(levels, fractions)
def test_a_class_level_is_valid_and_never_above_the_queues(level: Level,
                                                           fraction: Fraction) -> None:
    own = class_thresholds(Thresholds(count=level), fraction).count
    assert own is not None
    assert 1 <= own.resume <= own.stop <= level.stop and own.resume <= max(1, level.resume)
    assert own.stop <= max(1, level.stop * fraction)


@given(levels, fractions, st.lists(st.integers(0, 2 * 10**6), max_size=40))
def test_a_class_is_stopped_whenever_the_queue_is(level: Level, fraction: Fraction,
                                                  depths: list[int]) -> None:
    queue = Thresholds(count=level)
    state, classes = FlowState(), {}
    for messages in depths:
        depth = Depth(messages, None)
        state, _ = step(state, depth, queue)
        classes, _ = step_classes(classes, depth, depth, queue, {"c": fraction})
        assert classes["c"].stopped or not state.stopped
