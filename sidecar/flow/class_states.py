"""Producer classes in the engine: each queue's classes taken from its own setting or its
vhost's default (the whole mapping: the queue's wins), each class's machine stepped with
the queue's on the same depth and resume bound, and restored stopped after a restart.
The rules are `producer_classes` (pure); docs/graded-flow.md#producer-classes.

A queue with no classes costs a truth test per step and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from types import MappingProxyType

from sidecar.flow.live_depth import newest_moment
from sidecar.flow.persistence import StoredState
from sidecar.flow.producer_classes import parse_classes, step_classes
from sidecar.flow.queue_entry import NO_CLASS_STATES, NO_CLASSES, QueueEntry
from sidecar.flow.state_machine import EventKind, FlowEvent, FlowState
from sidecar.flow.telling import Telling
from sidecar.records.log_lines import printable

log = logging.getLogger("flow_sidecar.flow")


def classes_from(own: Mapping[str, float] | None,
                 vhost_default: Mapping[str, float] | None) -> Mapping[str, Fraction]:
    """A queue's classes: its own setting when it has one ({} included: no classes), else
    its vhost's default, else none. Both were validated when they were written."""
    raw = own if own is not None else vhost_default
    return _parsed(tuple(raw.items())) if raw else NO_CLASSES


@lru_cache(maxsize=4096)
def _parsed(items: tuple[tuple[str, float], ...]) -> Mapping[str, Fraction]:
    """Parsed once per distinct setting, not once per queue that has it (a vhost default
    re-resolved over 10,000 queues: docs/benchmarks.md#producer-classes)."""
    classes, problems = parse_classes(dict(items))
    return NO_CLASSES if problems else MappingProxyType(classes)


def adopt(entry: QueueEntry, classes: Mapping[str, Fraction]) -> bool:
    """Give the entry its classes; True when they changed (then it is to be stepped). The
    states of classes it no longer has go at once, stepped or not."""
    if classes == entry.producer_classes:
        return False
    entry.producer_classes = classes
    if entry.class_states.keys() - classes.keys():
        kept = {name: s for name, s in entry.class_states.items() if name in classes}
        entry.class_states = kept or NO_CLASS_STATES
        entry.classes_held = any(s.stopped for s in kept.values())
    return True


def restore(entry: QueueEntry, classes: Mapping[str, Fraction], stored: StoredState) -> None:
    """A new entry's classes. Those a process before this one left stopped stay stopped
    until figures of a later moment bound the depth under their resume (as the queue's
    own stop does: the engine sets `resume_after` when `classes_held`)."""
    entry.producer_classes = classes
    held = {name: FlowState(True, 0) for name in stored.stopped_classes
            if name in entry.producer_classes}
    if held:
        entry.class_states, entry.classes_held = held, True


def step(entry: QueueEntry, told: Telling) -> None:
    """Step the entry's classes: a flowing class on the newest depth, a stopped one only
    on an upper bound of it; a change of any moves the queue's version (long polls wake)."""
    if (not entry.producer_classes and not entry.class_states) or entry.depth is None:
        return
    bound = entry.resume_bound(entry.class_stopped_on) if entry.classes_held else None
    states, events = step_classes(entry.class_states, entry.depth, bound,
                                  entry.resolution.thresholds, entry.producer_classes)
    if states == entry.class_states:
        return
    if any(kind is EventKind.OVERFULL for kind in (e.kind for _, e in events)):
        entry.class_stopped_on = newest_moment(entry.statistics_at, entry.live)
    entry.class_states = states or NO_CLASS_STATES
    entry.classes_held = any(state.stopped for state in states.values())
    for name, event in events:
        told.journal.pending.lines.append(class_line(entry, name, event))
    told.bump(entry)


def class_line(entry: QueueEntry, name: str, event: FlowEvent) -> str:
    """One line per class transition (no Qpid log ID: Qpid has no classes)."""
    held = event.kind is EventKind.OVERFULL
    count = event.thresholds.count
    figure = "" if count is None else (
        f": Messages : {event.depth.messages}, Message Capacity : "
        f"{count.stop if held else count.resume}")
    return (f"[vh({printable(entry.vhost)})/qu({printable(entry.name)})] producer class "
            f"{printable(name)} {'stopped' if held else 'resumed'}{figure}")
