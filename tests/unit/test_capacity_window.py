"""The seed's capacity-window check in both dimensions, from tables and a property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.signals.capacity_window import (
    Window,
    capacity_check,
    mean_message_bytes,
    overflow_risk,
)

SIZE = Thresholds(size=Level(8000, 6000))
BOTH = Thresholds(count=Level(100, 50), size=Level(8000, 6000))
OVER_BY_2500 = ("stop 8000 bytes + active producers' capacity 2500 bytes = 10500 bytes > "
                "max-length-bytes 10000")


@pytest.mark.parametrize(
    ("thresholds", "window", "reaction", "depth", "details", "unjudged"),
    [
        # the count dimension, as before: the seed's 100 + 50 + 15 = 165 > 150
        (BOTH, Window(65, 1000, 0), 0, None,
         ["stop 100 + active producers' capacity 65 = 165 > max-length 150"], False),
        # size over max-length-bytes with declared byte windows
        (SIZE, Window(65, 2500, 0), 0, None, [OVER_BY_2500], False),
        (SIZE, Window(65, 2000, 0), 0, None, [], False),  # exactly the maximum: fits
        # messages published during the reaction time, at the queue's mean message size
        (SIZE, Window(65, 1000, 0), 20, Depth(10, 1000), [(
            "stop 8000 bytes + active producers' capacity 1000 bytes + 2000 bytes published "
            "while the stop reaches them = 11000 bytes > max-length-bytes 10000")], False),
        # a producer with a window that declared no bytes: no verdict, said so
        (SIZE, Window(65, 1000, 1), 0, None, [], True),
        (SIZE, Window(65, None, 2), 0, None, [], True),
        # ... unless what was declared already overflows (a lower bound)
        (SIZE, Window(65, 2500, 1), 0, None, [OVER_BY_2500], False),
        # no size threshold, or no broker-enforced byte maximum: nothing to judge
        (Thresholds(count=Level(100, 50)), Window(65, None, 2), 0, None,
         ["stop 100 + active producers' capacity 65 = 165 > max-length 150"], False),
    ],
)
def test_capacity_check(thresholds: Thresholds, window: Window, reaction: int,
                        depth: Depth | None, details: list[str], unjudged: bool) -> None:
    check = capacity_check(thresholds, 150, 10_000, window, reaction, depth)
    assert [r.describe() for r in check.risks] == details
    assert (check.unjudged is not None) is unjudged
    if unjudged:
        assert check.unjudged is not None and "X-Producer-Capacity-Bytes" in check.unjudged


def test_no_byte_maximum_means_no_size_verdict() -> None:
    check = capacity_check(SIZE, None, None, Window(65, None, 2), 100, Depth(10, 10**6))
    assert check.risks == () and check.unjudged is None


@pytest.mark.parametrize(("depth", "mean"), [
    (None, 0), (Depth(0, 0), 0), (Depth(3, None), 0), (Depth(3, 10), 4), (Depth(2, 10), 5)])
def test_mean_message_bytes(depth: Depth | None, mean: int) -> None:
    assert mean_message_bytes(depth) == mean


@given(st.integers(1, 10**6), st.integers(0, 10**6), st.integers(0, 10**6),
       st.integers(1, 10**7))
def test_a_risk_is_reported_exactly_when_the_sum_exceeds_the_maximum(
        stop: int, capacity: int, reaction: int, maximum: int) -> None:
    risk = overflow_risk(stop, capacity, reaction, maximum)
    assert (risk is not None) == (capacity + reaction > 0 and stop + capacity + reaction
                                  > maximum)
