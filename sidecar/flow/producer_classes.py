"""Producer classes: a queue's classes of producers, each stopped at a fraction of the
queue's own thresholds, so a batch job pauses before a payment service does (issue 43).
Pure: no I/O, no clock.

`"producerClasses": {"bulk": 0.6, "standard": 0.85}` sits beside the `qpid.flow_*` keys.
A class's thresholds are the queue's, per watched dimension, times its fraction as written
in decimal, rounded down (a class never stops later than its exact fraction: the safe
side), stop at least 1 and resume at least 1 and at most the class's stop. Each class runs
Qpid's machine (`state_machine.step`) on those thresholds, stepped like the queue: towards
stopped on the newest depth, towards flowing only on an upper bound of it (`live_depth.
resume_depth`). A producer of a stopped class is told `flowStopped` with `class:<name>` in
`flowStoppedBy`; a producer with no class or an unknown one gets the queue's own state
(Qpid's behaviour). A class's grants take only the headroom below its own stop: the grant
desk is given the class's thresholds and stopped state (`grant_view`). Rules and a worked
example: docs/graded-flow.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from sidecar.flow.state_machine import FlowEvent, FlowState, step
from sidecar.flow.thresholds import SourceProblem, parse_fraction
from sidecar.model import Depth, Level, Thresholds

PRODUCER_CLASSES = "producerClasses"
MAX_CLASSES = 16
# header-safe: the name travels in X-Producer-Class and in flowStoppedBy
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_NAME = re.compile(NAME)

Classes = Mapping[str, Fraction]  # validated: name -> fraction in (0, 1]


def class_problems(value: object) -> list[SourceProblem]:
    """Every reason to refuse a `producerClasses` setting (a 422 naming the field and the
    class); [] to accept it. None or {} means no classes."""
    return parse_classes(value)[1]


def parse_classes(value: object) -> tuple[dict[str, Fraction], list[SourceProblem]]:
    """The classes a setting gives, and every reason to refuse it (then use none)."""
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [SourceProblem(PRODUCER_CLASSES, f"{PRODUCER_CLASSES} must be an object "
                                  f"of class names to fractions, got {value!r}")]
    problems: list[SourceProblem] = []
    if len(value) > MAX_CLASSES:
        problems.append(SourceProblem(PRODUCER_CLASSES, f"{PRODUCER_CLASSES} has {len(value)} "
                                      f"classes: at most {MAX_CLASSES}"))
    classes: dict[str, Fraction] = {}
    for name, fraction in value.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(SourceProblem(PRODUCER_CLASSES, (
                f"{PRODUCER_CLASSES}: class name {name!r} must be 1 to 64 letters, digits, "
                "'_', '.' or '-', starting with a letter or digit")))
            continue
        parsed = parse_fraction(f"{PRODUCER_CLASSES}.{name}", fraction)
        if isinstance(parsed, SourceProblem):
            problems.append(parsed)
        else:
            classes[name] = parsed
    return ({}, problems) if problems else (classes, [])


def _scaled(level: Level | None, fraction: Fraction) -> Level | None:
    if level is None:
        return None
    stop = max(1, level.stop * fraction.numerator // fraction.denominator)
    resume = level.resume * fraction.numerator // fraction.denominator
    return Level(stop, min(stop, max(1, resume)))


# a queue's classes step on every poll that moves its depth: the same few (thresholds,
# fraction) pairs each time, and rational arithmetic is a tenth of what a step costs
@lru_cache(maxsize=4096)
def class_thresholds(thresholds: Thresholds, fraction: Fraction) -> Thresholds:
    """A class's own thresholds: the queue's, scaled and rounded down (module docstring)."""
    return Thresholds(_scaled(thresholds.count, fraction), _scaled(thresholds.size, fraction))


def thresholds_for(producer_class: str | None, thresholds: Thresholds,
                   classes: Classes) -> Thresholds:
    """The thresholds a producer is held to: its class's, or the queue's own when it has no
    class or one the queue does not define."""
    fraction = classes.get(producer_class) if producer_class is not None else None
    return thresholds if fraction is None else class_thresholds(thresholds, fraction)


def step_classes(states: Mapping[str, FlowState], depth: Depth, resume_bound: Depth | None,
                 thresholds: Thresholds, classes: Classes
                 ) -> tuple[dict[str, FlowState], tuple[tuple[str, FlowEvent], ...]]:
    """Advance every class's machine by one sample: a flowing class on the newest `depth`,
    a stopped one only on `resume_bound`, an upper bound of the depth (None: it stays
    stopped). Classes no longer defined are dropped; new ones start flowing."""
    new: dict[str, FlowState] = {}
    events: list[tuple[str, FlowEvent]] = []
    for name, fraction in sorted(classes.items()):
        state = states.get(name, FlowState())
        own = class_thresholds(thresholds, fraction)
        seen = resume_bound if state.stopped and own.enabled else depth
        if seen is None:
            new[name] = state
            continue
        new[name], happened = step(state, seen, own)
        events.extend((name, event) for event in happened)
    return new, tuple(events)


def stopped_by_name(producer_class: str) -> str:
    """How `flowStoppedBy` names a class that stops its producers."""
    return f"class:{producer_class}"


@dataclass(frozen=True)
class ProducerFlow:
    """What one producer is told: stopped or not, and by what (the queue's reasons, then
    its class's)."""

    stopped: bool
    stopped_by: tuple[str, ...]


def producer_flow(producer_class: str | None, queue_stopped_by: tuple[str, ...],
                  class_states: Mapping[str, FlowState]) -> ProducerFlow:
    """A producer's own flow state: the queue's reasons (`flowStoppedBy` as it is today),
    plus its class when the class is stopped; no class or an unknown one: the queue's."""
    state = class_states.get(producer_class) if producer_class is not None else None
    by = queue_stopped_by
    if producer_class is not None and state is not None and state.stopped:
        by = (*by, stopped_by_name(producer_class))
    return ProducerFlow(bool(by), by)


def grant_view(producer_class: str | None, thresholds: Thresholds, queue_stopped: bool,
               classes: Classes, class_states: Mapping[str, FlowState]
               ) -> tuple[Thresholds, bool]:
    """(thresholds, stopped) the grant desk judges one producer's ask by: its class's own,
    so a class is granted only the headroom below its own stop."""
    state = class_states.get(producer_class) if producer_class is not None else None
    class_stopped = state is not None and state.stopped and producer_class in classes
    return thresholds_for(producer_class, thresholds, classes), queue_stopped or class_stopped
