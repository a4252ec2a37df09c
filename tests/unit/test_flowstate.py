"""The flow state machine: every transition from tables, and its invariants as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.state_machine import Depth, EventKind, FlowState, step
from sidecar.flow.thresholds import Level, Thresholds

COUNT_900_500 = Thresholds(count=Level(900, 500))
SIZE_8K_6K = Thresholds(size=Level(8192, 6144))
BOTH = Thresholds(count=Level(4000, 3000), size=Level(8192, 6144))
OFF, ON = FlowState(False, 3), FlowState(True, 3)


@pytest.mark.parametrize(
    ("state", "depth", "thresholds", "stopped", "event"),
    [
        # OFF stays OFF up to and including the stop threshold (strictly greater turns on).
        (OFF, Depth(0, 0), COUNT_900_500, False, None),
        (OFF, Depth(900, 10**9), COUNT_900_500, False, None),
        (OFF, Depth(901, 0), COUNT_900_500, True, EventKind.OVERFULL),
        (OFF, Depth(10**6, 0), SIZE_8K_6K, False, None),
        (OFF, Depth(0, 8192), SIZE_8K_6K, False, None),
        (OFF, Depth(0, 8193), SIZE_8K_6K, True, EventKind.OVERFULL),
        # Either dimension crossing turns on.
        (OFF, Depth(4001, 0), BOTH, True, EventKind.OVERFULL),
        (OFF, Depth(0, 8193), BOTH, True, EventKind.OVERFULL),
        (OFF, Depth(4000, 8192), BOTH, False, None),
        # ON stays ON until strictly below resume...
        (ON, Depth(500, 0), COUNT_900_500, True, None),
        (ON, Depth(499, 0), COUNT_900_500, False, EventKind.UNDERFULL),
        (ON, Depth(700, 0), COUNT_900_500, True, None),
        (ON, Depth(10**6, 0), COUNT_900_500, True, None),
        # ...in every watched dimension.
        (ON, Depth(2999, 6144), BOTH, True, None),
        (ON, Depth(3000, 6143), BOTH, True, None),
        (ON, Depth(2999, 6143), BOTH, False, EventKind.UNDERFULL),
        # Disabled: always OFF; an ON queue whose control is disabled is released.
        (OFF, Depth(10**9, 10**12), Thresholds(), False, None),
        (ON, Depth(10**9, 10**12), Thresholds(), False, EventKind.UNDERFULL),
        # Unknown bytes (streams) are not watched: never a stop, never holding a resume.
        (OFF, Depth(0, None), SIZE_8K_6K, False, None),
        (OFF, Depth(4001, None), BOTH, True, EventKind.OVERFULL),
        (ON, Depth(2999, None), BOTH, False, EventKind.UNDERFULL),
    ],
)
def test_transition_table(state: FlowState, depth: Depth, thresholds: Thresholds,
                          stopped: bool, event: EventKind | None) -> None:
    new, events = step(state, depth, thresholds)
    assert new.stopped is stopped
    assert [e.kind for e in events] == ([event] if event else [])
    expected_count = state.stopped_count + (1 if event is EventKind.OVERFULL else 0)
    assert new.stopped_count == expected_count
    if events:
        assert events[0].depth == depth and events[0].stopped_count == expected_count


def test_resume_equal_to_stop_is_plain_threshold() -> None:
    t = Thresholds(count=Level(10, 10))
    on, _ = step(FlowState(), Depth(11, 0), t)
    assert on.stopped
    assert step(on, Depth(10, 0), t)[0].stopped
    assert not step(on, Depth(9, 0), t)[0].stopped


levels = st.builds(lambda stop, gap: Level(stop, stop - gap),
                   st.integers(1, 10_000), st.integers(0, 10_000)
                   ).filter(lambda level: level.resume >= 0)
thresholds = st.builds(Thresholds, st.none() | levels, st.none() | levels)
depths = st.builds(Depth, st.integers(0, 20_000), st.none() | st.integers(0, 20_000))


@given(thresholds, st.lists(depths, max_size=60))
def test_machine_invariants(t: Thresholds, samples: list[Depth]) -> None:
    state = FlowState()
    turned_on = 0
    for depth in samples:
        new, events = step(state, depth, t)
        if new.stopped and not state.stopped:
            turned_on += 1
            # never turns ON at or below every stop threshold
            assert (t.count and depth.messages > t.count.stop) or (
                t.size and depth.bytes is not None and depth.bytes > t.size.stop)
        if state.stopped and not new.stopped and t.enabled:
            # never turns OFF at or above a resume threshold
            assert t.count is None or depth.messages < t.count.resume
            assert t.size is None or depth.bytes is None or depth.bytes < t.size.resume
        if not t.enabled:
            assert not new.stopped
        assert len(events) == int(new.stopped != state.stopped)
        state = new
    assert state.stopped_count == turned_on
