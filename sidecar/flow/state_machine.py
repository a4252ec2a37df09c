"""The per-queue flow state machine of Qpid's producer flow control, as a pure function.

OFF -> ON when any watched dimension is strictly above its stop threshold; ON -> OFF when
every watched dimension is strictly below its resume threshold. The hysteresis between
the two is what keeps producers from flapping. `flowStoppedCount` counts OFF -> ON.
A queue with no watched dimension (disabled) is always OFF.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.model import Depth, EventKind, FlowEvent, Thresholds

# the value types are sidecar.model's; re-exported for the modules that import them here
__all__ = ["Depth", "EventKind", "FlowEvent", "FlowState", "Thresholds", "over_stop", "step",
           "under_resume"]



@dataclass(frozen=True)
class FlowState:
    """What the machine remembers about a queue between samples."""

    stopped: bool = False
    stopped_count: int = 0
    # a broker that runs the machine itself (qpidd): its own counter as last read, so
    # that ours moves by as much as its moved, and not back when it restarts
    broker_count: int | None = None


def over_stop(depth: Depth, thresholds: Thresholds) -> bool:
    """True when any watched dimension is strictly above its stop threshold (a dimension
    whose figure is unknown is not watched)."""
    count, size = thresholds.count, thresholds.size
    return (count is not None and depth.messages > count.stop) or (
        size is not None and depth.bytes is not None and depth.bytes > size.stop
    )


def under_resume(depth: Depth, thresholds: Thresholds) -> bool:
    """True when every watched dimension is strictly below its resume threshold."""
    count, size = thresholds.count, thresholds.size
    return (count is None or depth.messages < count.resume) and (
        size is None or depth.bytes is None or depth.bytes < size.resume
    )


def step(
    state: FlowState, depth: Depth, thresholds: Thresholds
) -> tuple[FlowState, tuple[FlowEvent, ...]]:
    """Advance one queue's machine by one depth sample:
    (state, depth, thresholds) -> (state, events)."""
    if not state.stopped:
        if thresholds.enabled and over_stop(depth, thresholds):
            new = FlowState(stopped=True, stopped_count=state.stopped_count + 1)
            return new, (FlowEvent(EventKind.OVERFULL, depth, thresholds, new.stopped_count),)
        return state, ()
    if not thresholds.enabled or under_resume(depth, thresholds):
        new = FlowState(stopped=False, stopped_count=state.stopped_count)
        return new, (FlowEvent(EventKind.UNDERFULL, depth, thresholds, new.stopped_count),)
    return state, ()
