"""One log line per kind of repeatable event per interval, with a count of those left out."""

from __future__ import annotations

import logging

import pytest

from sidecar.records.throttled_log import ThrottledLines, ThrottledLog


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


def test_another_librarys_repeated_lines_are_throttled(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    logger = logging.getLogger("test.throttle.lines")
    logger.addFilter(ThrottledLines(frozenset({"Exceeded concurrency limit."}),
                                    ThrottledLog(logger, interval=10, clock=lambda: now[0])))
    with caplog.at_level(logging.WARNING, "test.throttle.lines"):
        for _ in range(5):
            logger.warning("Exceeded concurrency limit.")
            logger.warning("something else")
        now[0] = 10.0
        logger.warning("Exceeded concurrency limit.")
    assert [r.getMessage() for r in caplog.records] == [
        "Exceeded concurrency limit.", *["something else"] * 5,
        "Exceeded concurrency limit. (4 more like this in the last 10 s not logged)"]
