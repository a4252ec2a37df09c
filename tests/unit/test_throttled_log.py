"""One log line per kind of repeatable event per interval, with a count of those left out."""

from __future__ import annotations

import logging

import pytest

from sidecar.records.throttled_log import ThrottledLog


def test_one_line_per_interval_then_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    log = ThrottledLog(logging.getLogger("test.throttle"), interval=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.throttle"):
        assert log.note("abort", "client went away: %s", "PUT /x")
        for _ in range(19):
            now[0] += 0.1
            assert not log.note("abort", "client went away: %s", "PUT /x")
        assert log.note("other", "another kind")
        now[0] = 111.0
        assert log.note("abort", "client went away: %s", "PUT /y")
    assert [r.getMessage() for r in caplog.records] == [
        "client went away: PUT /x", "another kind",
        "client went away: PUT /y (19 more like this in the last 11 s not logged)"]
