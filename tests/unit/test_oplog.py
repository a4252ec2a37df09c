"""Operator log lines: Qpid's IDs with Broker-J's wording, as in the seed's example."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.state_machine import Depth, EventKind, FlowEvent
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.records.log_lines import enforced_line, printable, removed_line, transition_line

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


@pytest.mark.parametrize(("event", "body"), [
    # only the watched dimension's figures: no "Capacity : 0" for the other one
    (FlowEvent(EventKind.OVERFULL, Depth(5, 0), Thresholds(count=Level(4, 2)), 1),
     "QUE-1003 : Overfull : Messages : 5, Message Capacity : 4"),
    (FlowEvent(EventKind.UNDERFULL, Depth(1, 0), Thresholds(count=Level(4, 2)), 1),
     "QUE-1004 : Underfull : Messages : 1, Message Capacity : 2"),
    (FlowEvent(EventKind.OVERFULL, Depth(3, 1200), Thresholds(size=Level(1000, 800)), 1),
     "QUE-1003 : Overfull : Size : 1,200 bytes, Capacity : 1,000"),  # the seed's line
    (FlowEvent(EventKind.UNDERFULL, Depth(3, 600), Thresholds(size=Level(1000, 800)), 1),
     "QUE-1004 : Underfull : Size : 600 bytes, Resume Capacity : 800"),
    # disabling a stopped queue: nothing is watched, the depth alone
    (FlowEvent(EventKind.UNDERFULL, Depth(12, 3400), Thresholds(), 1),
     "QUE-1004 : Underfull : Size : 3,400 bytes, Messages : 12"),
    # a stream: no byte count, so no size figure at all
    (FlowEvent(EventKind.UNDERFULL, Depth(12, None), Thresholds(), 1),
     "QUE-1004 : Underfull : Messages : 12"),
    (FlowEvent(EventKind.OVERFULL, Depth(12, None), BOTH, 1),
     "QUE-1003 : Overfull : Messages : 12, Message Capacity : 900"),
])
def test_only_watched_dimensions_are_printed(event: FlowEvent, body: str) -> None:
    assert transition_line("/", "q", event) == f"[vh(/)/qu(q)] {body}"


def test_control_characters_in_names_are_escaped() -> None:
    """RabbitMQ accepts NUL and other controls in names (it strips only CR and LF): a
    name must never break a log line or forge one."""
    event = FlowEvent(EventKind.OVERFULL, Depth(5, 0), Thresholds(count=Level(4, 2)), 1)
    line = transition_line("v\nh", "q\x00\n[vh(/)/qu(x)] QUE-1004", event, "r\r")
    assert "\n" not in line and "\x00" not in line and "\r" not in line
    assert line.startswith("[vh(v\\nh)/qu(q\\x00\\n[vh(/)/qu(x)] QUE-1004)] QUE-1003")
    assert enforced_line("p\u2028", "q\x1b[31m") == (
        "[producer(p\\u2028)] CHN-1005 : Flow Control Enforced (Queue q\\x1b[31m)")
    assert removed_line("p\x85") == "[producer(p\\x85)] CHN-1006 : Flow Control Removed"


@given(st.text())
def test_no_name_puts_a_control_character_in_a_line(name: str) -> None:
    event = FlowEvent(EventKind.UNDERFULL, Depth(0, 0), Thresholds(), 1)
    for line in (transition_line(name, name, event, name), enforced_line(name, name),
                 removed_line(name)):
        assert len(line.splitlines()) == 1
        assert not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in line)
    assert printable(name) == name or not name.isprintable()


def test_channel_lines() -> None:
    assert enforced_line("C1", "MyQueue") == (
        "[producer(C1)] CHN-1005 : Flow Control Enforced (Queue MyQueue)")
    assert removed_line("C1") == "[producer(C1)] CHN-1006 : Flow Control Removed"
