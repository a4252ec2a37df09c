"""Following a broker that runs the flow machine itself (Qpid C++, Broker-J). Pure.

Where the broker enforces producer flow control, the sidecar must not second-guess it:
the queue's state is the broker's `flowStopped`. The counter is the sidecar's own and never
goes down (SPEC: "It never goes down and survives restarts"): it moves by as much as the
broker's `flowStoppedCount` moved between two polls, and by that counter's whole value
when it went back (qpidd restarted, its counter with it); on first sight of a queue it
takes the broker's counter if that is higher. A broker without a counter is counted for
(OFF -> ON changes seen). Answers show the broker's own counter beside ours.
`follow` has the shape of `state_machine.step` so that the engine treats both alike: it
adopts the reported state and emits the transition events
(QUE-1003/1004 lines, webhooks, history) for a change of `flowStopped` between two polls.

A whole episode shorter than a poll interval (stopped and resumed in between) shows only
as a counter that moved; it is not replayed as two events, which the broker did not report.
"""

from __future__ import annotations

from sidecar.flow.state_machine import Depth, EventKind, FlowEvent, FlowState
from sidecar.flow.thresholds import Thresholds
from sidecar.model import BrokerFlow


def follow(
    state: FlowState, depth: Depth, thresholds: Thresholds, reported: BrokerFlow
) -> tuple[FlowState, tuple[FlowEvent, ...]]:
    """(state, depth, thresholds, what the broker reports) -> (state, events)."""
    theirs, last = reported.stopped_count, state.broker_count
    seen = int(reported.stopped and not state.stopped)  # an OFF -> ON change seen here
    if theirs is None:  # the broker keeps no counter: count the changes seen
        count = state.stopped_count + seen
    elif last is None:  # first sight (or a restart of ours): theirs if it is higher
        count = max(state.stopped_count + seen, theirs)
    else:  # theirs went back: it restarted, and all of its count is since then
        moved = theirs - last if theirs >= last else theirs
        count = state.stopped_count + max(moved, seen)
    new = FlowState(stopped=reported.stopped, stopped_count=count, broker_count=theirs)
    if new.stopped == state.stopped:
        return new, ()
    kind = EventKind.OVERFULL if new.stopped else EventKind.UNDERFULL
    return new, (FlowEvent(kind, depth, thresholds, new.stopped_count),)
