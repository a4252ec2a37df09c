"""The producer registry: activity, capacity sums, the seed's C1/C2 example, CHN lines."""

from __future__ import annotations

import logging

import pytest

from sidecar.signals.producers import ProducerRegistry, overflow_risk

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
