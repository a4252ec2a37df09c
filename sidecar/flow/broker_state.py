"""Following a broker that runs the flow machine itself (Qpid C++, Broker-J). Pure.

Where the broker enforces producer flow control, the sidecar must not second-guess it:
the queue's state is the broker's `flowStopped` and its counter the broker's
`flowStoppedCount` (or, for a broker without one, the count of OFF -> ON changes seen).
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
    count = reported.stopped_count
    if count is None:  # the broker keeps no counter: count the OFF -> ON changes seen
        count = state.stopped_count + (reported.stopped and not state.stopped)
    new = FlowState(stopped=reported.stopped, stopped_count=count)
    if new.stopped == state.stopped:
        return new, ()
    kind = EventKind.OVERFULL if new.stopped else EventKind.UNDERFULL
    return new, (FlowEvent(kind, depth, thresholds, new.stopped_count),)
