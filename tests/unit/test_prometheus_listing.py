"""Which queues the Prometheus depth source reads on their own, and when (pure scheduling,
with a scripted management API: the real broker path is
tests/integration/test_threshold_sources.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sidecar.broker.prometheus_text import QueueFigures
from sidecar.broker.rabbitmq_prometheus import (
    FRESH_FOR,
    LISTING_TTL,
    SINGLE_READS,
    RabbitMQDepthSources,
)
from sidecar.model import QueueInfo, QueueKey
from tests.utils.clock import Clock

POLICY = {"max-length-bytes": 1000}


class Management:
    """The broker as the management API shows it: `queues` by key; `policy_seen` are the
    queues whose effective policy the broker gives already."""

    def __init__(self) -> None:
        self.queues: dict[QueueKey, QueueInfo] = {}
        self.policy_seen: set[QueueKey] = set()
        self.single_reads: list[QueueKey] = []
        self.listings = 0
        self.figures = None

    def declare(self, name: str) -> QueueKey:
        key = ("/", name)
        self.queues[key] = QueueInfo("/", name, None, None)
        return key

    def _shown(self, key: QueueKey) -> QueueInfo:
        info = self.queues[key]
        return replace(info, policy=POLICY) if key in self.policy_seen else info

    def list_queues(self) -> list[QueueInfo]:
        self.listings += 1
        return [self._shown(key) for key in self.queues]

    def fetch_queue(self, vhost: str, name: str) -> QueueInfo | None:
        self.single_reads.append((vhost, name))
        return self._shown((vhost, name)) if (vhost, name) in self.queues else None

    def fetch_alarms(self) -> dict[str, Any]:
        return {}

    def read_consumers(self) -> None:
        return None


class Endpoints:
    def __init__(self, management: Management) -> None:
        self.management = management
        self.urls: list[str] = []

    def queue_figures(self, families: Any = (), nodes: set[str] | None = None
                      ) -> dict[QueueKey, QueueFigures]:
        return {key: QueueFigures(0, 0, 0) for key in self.management.queues}


def sources() -> tuple[RabbitMQDepthSources, Management, Clock]:
    management, clock = Management(), Clock()
    source = RabbitMQDepthSources(management, Endpoints(management),  # type: ignore[arg-type]
                                  "prometheus", clock=clock)
    return source, management, clock


def policy_of(source: RabbitMQDepthSources, key: QueueKey) -> dict[str, Any]:
    return {(q.vhost, q.name): dict(q.policy) for q in source.fetch_queues()}[key]


def test_a_queue_first_seen_by_a_listing_before_its_policy_gets_it_from_later_reads() -> None:
    source, management, clock = sources()
    management.declare("old")
    source.fetch_queues()  # the first listing
    clock.now = LISTING_TTL + 1  # the next poll lists again...
    key = management.declare("new")  # ...just after a queue came whose policy shows later
    assert policy_of(source, key) == {}
    management.policy_seen.add(key)
    clock.now += 1
    assert policy_of(source, key) == POLICY  # a single read, not the next listing
    assert management.listings == 2


def test_a_new_queue_is_read_alone_only_for_its_first_seconds() -> None:
    source, management, clock = sources()
    source.fetch_queues()
    key = management.declare("new")
    for _ in range(3):
        source.fetch_queues()
        clock.now += 1
    assert management.single_reads == [key] * 3
    clock.now += FRESH_FOR
    source.fetch_queues()
    assert len(management.single_reads) == 3


def test_many_fresh_queues_take_turns_within_the_single_read_budget() -> None:
    source, management, clock = sources()
    management.declare("old")
    source.fetch_queues()
    clock.now = LISTING_TTL + 1
    keys = [management.declare(f"q{n}") for n in range(SINGLE_READS + 10)]
    source.fetch_queues()  # lists them: all fresh
    for _ in range(2):
        clock.now += 1
        source.fetch_queues()
    assert management.listings == 2  # fresh queues never force a listing
    assert len(management.single_reads) == 2 * SINGLE_READS
    assert set(management.single_reads) == set(keys)  # every one read in turn
