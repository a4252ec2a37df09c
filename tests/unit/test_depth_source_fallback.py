"""When `--depth-source auto` gives up on the Prometheus endpoint, and when it does not
(pure scheduling, with a scripted broker: the real restart is
tests/integration/test_broker_restart.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sidecar.broker import BrokerError
from sidecar.broker.prometheus_text import QueueFigures
from sidecar.broker.rabbitmq_prometheus import (
    PROBE_AGAIN,
    STATISTICS_OFF_AFTER,
    RabbitMQDepthSources,
)
from sidecar.model import QueueInfo, QueueKey
from tests.utils.clock import Clock

KEY: QueueKey = ("/", "q")


class Broker:
    """Management API and Prometheus endpoint of one node: `up` for the whole broker,
    `named` for whether the endpoint names the queue yet (its statistics timer fired)."""

    def __init__(self) -> None:
        self.up = True
        self.named = True
        self.figure_reads = 0
        self.urls: list[str] = []
        self.figures = None

    def _check(self) -> None:
        if not self.up:
            raise BrokerError("connection refused")

    # the management API
    def list_queues(self) -> list[QueueInfo]:
        self._check()
        return [QueueInfo("/", "q", None, None)]

    def fetch_queues(self) -> list[QueueInfo]:
        self._check()
        return [QueueInfo("/", "q", 3, 30)]

    def fetch_queue(self, vhost: str, name: str) -> QueueInfo | None:
        self._check()
        return QueueInfo(vhost, name, None, None)

    def fetch_alarms(self) -> dict[str, Any]:
        self._check()
        return {}

    def read_consumers(self) -> None:
        return None

    # the Prometheus endpoint
    def queue_figures(self, families: Any = (), nodes: set[str] | None = None
                      ) -> dict[QueueKey, QueueFigures]:
        self._check()
        self.figure_reads += 1
        return {KEY: QueueFigures(5, 0, 50)} if self.named else {}


def auto() -> tuple[RabbitMQDepthSources, Broker, Clock]:
    broker, clock = Broker(), Clock()
    source = RabbitMQDepthSources(broker, broker, "auto",  # type: ignore[arg-type]
                                  clock=clock)
    return source, broker, clock


def polls(source: RabbitMQDepthSources, clock: Clock, seconds: float,
          every: float = 0.5) -> list[int | None]:
    """Poll for `seconds`; the depth each poll gave the queue (None: none)."""
    depths = []
    end = clock.now + seconds
    while clock.now < end:
        depths.append(source.fetch_queues()[0].messages)
        clock.now += every
    return depths


def test_a_whole_broker_outage_does_not_hold_the_endpoint_back(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    source, broker, clock = auto()
    assert polls(source, clock, 1) == [5, 5]
    broker.up = False
    for _ in range(5):
        with pytest.raises(BrokerError):
            source.fetch_queues()
        clock.now += 0.5
    broker.up, broker.named = True, False  # back, but no statistics timer fired yet
    reads = broker.figure_reads
    depths = polls(source, clock, STATISTICS_OFF_AFTER - 1)
    assert broker.figure_reads - reads == len(depths)  # the endpoint asked every poll
    assert set(depths) == {None}  # no depth from the endpoint yet, and none guessed
    broker.named = True
    assert polls(source, clock, 1) == [5, 5]
    assert source.active == "prometheus"
    failed = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in failed] == [
        "queue depth from the Prometheus endpoint failed: connection refused"]
    assert "queue depth from the Prometheus endpoint read again" in caplog.text


def test_an_endpoint_that_fails_while_the_management_api_answers_waits_probe_again() -> None:
    source, broker, clock = auto()
    polls(source, clock, 1)
    broker.named = False  # e.g. another exporter on the port: it never names a queue
    depths = polls(source, clock, STATISTICS_OFF_AFTER + 1)
    assert depths[0] is None and depths[-1] == 3  # then the management API's statistics
    assert source.active == "management"
    reads = broker.figure_reads
    polls(source, clock, PROBE_AGAIN - 2)
    assert broker.figure_reads == reads  # not asked again before PROBE_AGAIN
    polls(source, clock, 3)
    assert broker.figure_reads == reads + 1  # asked once, and still naming none
    assert source.active == "management"


def test_a_broker_without_queues_is_a_true_answer(caplog: pytest.LogCaptureFixture) -> None:
    broker, clock = Broker(), Clock()
    broker.list_queues = lambda: []  # type: ignore[method-assign]
    broker.named = False
    source = RabbitMQDepthSources(broker, broker, "auto",  # type: ignore[arg-type]
                                  clock=clock)
    for _ in range(3 * int(STATISTICS_OFF_AFTER)):
        assert source.fetch_queues() == []
        clock.now += 0.5
    assert source.active == "prometheus" and "WARNING" not in caplog.text
