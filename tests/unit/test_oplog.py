"""Operator log lines: Qpid's IDs with Broker-J's wording, as in the seed's example."""

from __future__ import annotations

from sidecar.flow.state_machine import Depth, EventKind, FlowEvent
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.records.log_lines import enforced_line, removed_line, transition_line

BOTH = Thresholds(count=Level(900, 500), size=Level(1000, 800))


def test_overfull_and_underfull_lines() -> None:
    over = FlowEvent(EventKind.OVERFULL, Depth(901, 1200), BOTH, 1)
    under = FlowEvent(EventKind.UNDERFULL, Depth(499, 600), BOTH, 1)
    assert transition_line("/test", "MyQueue", over) == (
        "[vh(/test)/qu(MyQueue)] QUE-1003 : Overfull : Size : 1,200 bytes, Capacity : 1,000, "
        "Messages : 901, Message Capacity : 900")
    assert transition_line("/test", "MyQueue", under, "data fresh") == (
        "[vh(/test)/qu(MyQueue)] QUE-1004 : Underfull : Size : 600 bytes, "
        "Resume Capacity : 800, Messages : 499, Message Capacity : 500 (data fresh)")


def test_an_unwatched_dimension_shows_qpids_zero() -> None:
    event = FlowEvent(EventKind.OVERFULL, Depth(5, 0), Thresholds(count=Level(4, 2)), 1)
    assert transition_line("/", "q", event).endswith(
        "Size : 0 bytes, Capacity : 0, Messages : 5, Message Capacity : 4")


def test_channel_lines() -> None:
    assert enforced_line("C1", "MyQueue") == (
        "[producer(C1)] CHN-1005 : Flow Control Enforced (Queue MyQueue)")
    assert removed_line("C1") == "[producer(C1)] CHN-1006 : Flow Control Removed"
