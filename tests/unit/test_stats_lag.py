"""The statistics lag measured from live histories (pure), and the engine using the larger
of it and the option, with a warning for operators."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.stats_lag import LagMeter
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import LiveSample, QueueInfo

KEY = ("/", "q")


def test_a_figure_is_dated_by_the_live_run_it_belongs_to() -> None:
    meter = LagMeter()
    for at, ready in [(1.0, 10), (1.5, 10), (2.0, 20), (3.0, 30), (4.0, 30)]:
        meter.live(KEY, at, ready)
    # statistics sent at 9.0 saying 20: that run ended when 30 was first seen, at 3.0
    assert meter.statistics(KEY, 9.0, 20) == pytest.approx(6.0)
    assert meter.statistics(KEY, 9.5, 30) is None  # still 30: as new as the poll, maybe
    assert meter.statistics(KEY, 9.5, 25) is None  # never seen live: no date
    assert meter.statistics(("/", "other"), 9.5, 0) is None
    assert meter.measured() == pytest.approx(6.0)


def test_the_measurement_is_a_high_quantile_of_recent_observations() -> None:
    meter = LagMeter(window=10, quantile=0.9)
    for i in range(10):
        key = ("/", f"q{i}")
        meter.live(key, 0.0, 1)
        meter.live(key, 1.0, 2)
        meter.statistics(key, 1.0 + i, 1)  # lags 0 .. 9
    assert meter.measured() == pytest.approx(9.0)


@given(st.lists(st.tuples(st.floats(0, 100), st.integers(0, 5)), max_size=60),
       st.floats(0, 200), st.integers(0, 5))
def test_a_measurement_never_exceeds_the_time_since_a_sample_with_another_count(
        samples: list[tuple[float, int]], sent_at: float, ready: int) -> None:
    """A lower bound: the statistics' moment is at or after some live sample of `ready`,
    so the lag measured is at most sent_at minus the earliest such sample."""
    meter = LagMeter()
    for at, count in sorted(samples):
        meter.live(KEY, at, count)
    lag = meter.statistics(KEY, sent_at, ready)
    if lag is not None:
        assert lag > 0
        first_seen = min(at for at, count in samples if count == ready)
        assert lag <= sent_at - first_seen


def test_the_engine_uses_the_larger_lag_and_warns(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    engine = FlowEngine(Store(tmp_path / "db.sqlite3"), DefaultPolicy(), stale_after=30.0,
                        statistics_lag=2.0)
    info = QueueInfo("/", "q", 0, 0, unacked=0)
    engine.apply_poll([info], now=1.0, sent_at=1.0)
    engine.apply_live([LiveSample("/", "q", 0, 1.5, 0)], now=1.5)
    engine.apply_live([LiveSample("/", "q", 5, 2.0, 0)], now=2.0)
    with caplog.at_level(logging.WARNING):
        engine.apply_poll([info], now=8.0, sent_at=8.0)  # still 0: it describes before 2.0
    assert engine.statistics_lag == pytest.approx(6.0) and engine.configured_lag == 2.0
    assert "statistics lag by 6.0 s, more than --broker-stats-lag 2.0 s" in caplog.text
