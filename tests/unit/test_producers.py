"""The producer registry: activity, capacity sums, the seed's C1/C2 example, CHN lines,
producers that leave."""

from __future__ import annotations

import logging

import pytest

from sidecar.signals.capacity_window import Window, overflow_risk
from sidecar.signals.producers import REMEMBER_LEFT, ProducerRegistry

KEY = ("/", "orders")


def test_seed_c1_c2_example() -> None:
    """Stop 100 with capacities 50 and 15: up to 165 enqueued before both block."""
    registry = ProducerRegistry(ttl=60)
    registry.seen(KEY, "C1", 50, False, now=0)
    registry.seen(KEY, "C2", 15, False, now=0)
    assert registry.capacity(KEY) == 65
    risk = overflow_risk(100, registry.capacity(KEY), 0, 150)
    assert risk is not None and risk.describe() == (
        "stop 100 + active producers' capacity 65 = 165 > max-length 150")
    assert overflow_risk(100, 65, 0, 165) is None
    assert overflow_risk(100, 65, 0, None) is None
    assert overflow_risk(None, 65, 0, 150) is None


def test_publishing_during_the_reaction_time_counts_too() -> None:
    """Over RabbitMQ producers learn of a stop late: rate x reaction time also overshoots."""
    registry = ProducerRegistry(reaction_seconds=2.5)
    assert registry.during_reaction(100.0) == 250
    assert registry.during_reaction(None) == 0
    risk = overflow_risk(100, 65, registry.during_reaction(100.0), 300)
    assert risk is not None and risk.describe() == (
        "stop 100 + active producers' capacity 65 + 250 published while the stop reaches "
        "them = 415 > max-length 300")


def test_silent_producers_expire() -> None:
    registry = ProducerRegistry(ttl=10)
    assert registry.seen(KEY, "p", 5, False, now=0) is True
    assert registry.seen(KEY, "p", 5, False, now=5) is False  # nothing new for the answer
    assert registry.seen(KEY, "p", 7, False, now=6) is True   # capacity changed
    assert registry.sweep(now=15) == set()
    assert registry.sweep(now=17) == {KEY}
    assert registry.capacity(KEY) == 0


def test_chn_lines_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    registry = ProducerRegistry()
    with caplog.at_level(logging.INFO, logger="flow_sidecar.producers"):
        registry.seen(KEY, "p1", 1, False, now=0)
        registry.seen(KEY, "p1", 1, True, now=1)
        registry.seen(KEY, "p1", 1, True, now=2)
        registry.seen(KEY, "p1", 1, False, now=3)
        registry.seen(KEY, "p2", 1, True, now=3)
    assert [r.getMessage() for r in caplog.records] == [
        "[producer(p1)] CHN-1005 : Flow Control Enforced (Queue orders)",
        "[producer(p1)] CHN-1006 : Flow Control Removed",
        "[producer(p2)] CHN-1005 : Flow Control Enforced (Queue orders)",
    ]


def test_byte_windows_are_summed_and_undeclared_ones_counted() -> None:
    registry = ProducerRegistry()
    assert registry.window(KEY) == Window(0, None, 0)
    registry.seen(KEY, "a", 10, False, now=0, capacity_bytes=4096)
    registry.seen(KEY, "b", 5, False, now=0)
    registry.seen(KEY, "idle", 0, False, now=0)  # no window at all: nothing to declare
    assert registry.window(KEY) == Window(15, 4096, 1)
    assert registry.seen(KEY, "b", 5, False, now=1, capacity_bytes=100) is True
    assert registry.window(KEY) == Window(15, 4196, 0)


def test_a_producer_that_left_is_gone_everywhere_and_stays_gone(
        caplog: pytest.LogCaptureFixture) -> None:
    """A long-poll parked before the publisher closed answers later: it must neither
    bring the producer back nor log a CHN line for it."""
    other = ("/", "invoices")
    registry = ProducerRegistry()
    registry.seen(KEY, "p", 50, True, now=0)
    registry.seen(other, "p", 50, False, now=0)
    registry.seen(KEY, "q", 7, True, now=0)
    before = registry.revision(KEY)
    assert sorted(registry.leave("p", now=10)) == [other, KEY]
    assert registry.capacity(KEY) == 7 and registry.capacity(other) == 0
    assert registry.revision(KEY) != before
    with caplog.at_level(logging.INFO, logger="flow_sidecar.producers"):
        assert registry.seen(KEY, "p", 50, False, now=12, asked_at=9) is False
    assert caplog.records == [] and "p" not in registry.active(KEY)
    # a request made after leaving is a producer back at work
    assert registry.seen(KEY, "p", 50, False, now=13, asked_at=13) is True
    assert registry.capacity(KEY) == 57
    assert registry.leave("never-seen", now=14) == []


def test_departures_are_forgotten_after_any_long_poll_could_end() -> None:
    registry = ProducerRegistry()
    registry.leave("p", now=0)
    registry.sweep(now=REMEMBER_LEFT + 1)
    assert registry.seen(KEY, "p", 1, False, now=REMEMBER_LEFT + 2, asked_at=0) is True
