"""Following a broker that runs the flow machine itself: its state and counter are adopted,
a change of its flowStopped is an event, a broker without a counter is counted for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    (FlowState(False, 0), reported(True, 1), FlowState(True, 1, 1), EventKind.OVERFULL),
    (FlowState(True, 1, 1), reported(False, 1), FlowState(False, 1, 1), EventKind.UNDERFULL),
    (FlowState(True, 1, 1), reported(True, 1), FlowState(True, 1, 1), None),
    # an episode shorter than a poll shows in the counter only
    (FlowState(False, 1, 1), reported(False, 2), FlowState(False, 2, 2), None),
    # qpidd's counter restarts with the broker: ours never goes down
    (FlowState(False, 7, 7), reported(False, 0), FlowState(False, 7, 0), None),
    (FlowState(False, 7, 7), reported(True, 1), FlowState(True, 8, 1), EventKind.OVERFULL),
    (FlowState(False, 7, 7), reported(False, 2), FlowState(False, 9, 2), None),  # restarted
    (FlowState(False, 7, 0), reported(False, 2), FlowState(False, 9, 2), None),  # moved by 2
    # first sight (or after our restart): theirs when higher, ours otherwise
    (FlowState(False, 3), reported(False, 5), FlowState(False, 5, 5), None),
    (FlowState(False, 7), reported(False, 0), FlowState(False, 7, 0), None),
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


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=30))
def test_the_counter_never_goes_down_whatever_qpidd_reports(
        reports: list[tuple[bool, int]]) -> None:
    state = FlowState()
    for stopped, count in reports:
        new, _ = follow(state, D, T, reported(stopped, count))
        assert new.stopped_count >= state.stopped_count
        assert new.stopped_count >= state.stopped_count + (stopped and not state.stopped)
        state = new
