"""Following a broker that runs the flow machine itself: its state and counter are adopted,
a change of its flowStopped is an event, a broker without a counter is counted for."""

from __future__ import annotations

import pytest

from sidecar.flow.broker_state import follow
from sidecar.flow.state_machine import Depth, EventKind, FlowState
from sidecar.flow.thresholds import Level, Resolution, Source, Thresholds
from sidecar.model import BrokerFlow

T = Thresholds(count=Level(5, 2))
R = Resolution(T, Source.ARGUMENTS, Source.NONE)
D = Depth(6, 600)


def reported(stopped: bool, count: int | None) -> BrokerFlow:
    return BrokerFlow(stopped, count, R)


@pytest.mark.parametrize(("state", "broker", "after", "event"), [
    (FlowState(False, 0), reported(True, 1), FlowState(True, 1), EventKind.OVERFULL),
    (FlowState(True, 1), reported(False, 1), FlowState(False, 1), EventKind.UNDERFULL),
    (FlowState(True, 1), reported(True, 1), FlowState(True, 1), None),
    # an episode shorter than a poll shows in the counter only
    (FlowState(False, 1), reported(False, 2), FlowState(False, 2), None),
    # qpidd's counter restarts with the broker: the sidecar reports the broker's
    (FlowState(False, 7), reported(False, 0), FlowState(False, 0), None),
    # a broker without counter (Broker-J): the sidecar counts OFF -> ON
    (FlowState(False, 3), reported(True, None), FlowState(True, 4), EventKind.OVERFULL),
    (FlowState(True, 4), reported(True, None), FlowState(True, 4), None),
    (FlowState(True, 4), reported(False, None), FlowState(False, 4), EventKind.UNDERFULL),
])
def test_follow(state: FlowState, broker: BrokerFlow, after: FlowState,
                event: EventKind | None) -> None:
    new, events = follow(state, D, T, broker)
    assert new == after
    assert [e.kind for e in events] == ([event] if event else [])
    assert all(e.stopped_count == after.stopped_count and e.depth == D for e in events)
