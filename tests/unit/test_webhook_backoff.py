"""Retry delays: exponential in the attempt number, capped, with full jitter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.signals.webhook_delivery import RetryPolicy

POLICY = RetryPolicy(base=0.5, cap=60.0)
ALMOST_ONE = 1.0 - 1e-12


@pytest.mark.parametrize(("attempts", "ceiling"), [
    (1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 60.0), (60, 60.0), (10_000, 60.0),
])
def test_ceiling_doubles_per_attempt_up_to_the_cap(attempts: int, ceiling: float) -> None:
    assert POLICY.delay(attempts, ALMOST_ONE) == pytest.approx(ceiling)
    assert POLICY.delay(attempts, 0.0) == 0.0


@given(st.integers(min_value=1, max_value=1000),
       st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_full_jitter_is_uniform_below_the_ceiling(attempts: int, rand: float) -> None:
    ceiling = min(POLICY.cap, POLICY.base * 2 ** (attempts - 1))
    delay = POLICY.delay(attempts, rand)
    assert 0.0 <= delay <= ceiling
    assert delay == pytest.approx(rand * ceiling)
