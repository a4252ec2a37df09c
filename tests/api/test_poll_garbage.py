"""A poll of queues that did not change leaves (almost) nothing for the garbage collector.

Python's cyclic collector walks every object it tracks that is younger than its last
collection, holding the GIL (and `/flow`) while it does. At 10,000 queues, polls that made
three or four new objects a queue and kept them to the next poll gave it 35,000-96,000
objects a collection, freeing nothing (docs/benchmarks.md#garbage-collection). A queue the
broker reports as it did before keeps its objects through the engine, the live sampler's
hot set, the history and the sparklines.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sidecar.broker import LiveBatch
from sidecar.model import QueueKey
from tests.api.conftest import InProcessAPI, ScriptedBroker

pytestmark = pytest.mark.anyio
QUEUES = 1_000


class NothingLive:
    """A live depth source that reads nothing: the hot set is scanned all the same."""

    def sample(self, keys: list[QueueKey]) -> LiveBatch:
        return LiveBatch()

    def close(self) -> None:
        pass


@pytest.fixture
def collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


async def test_a_poll_of_unchanged_queues_keeps_its_objects(
        make_api: Callable[..., Any], collector_off: None) -> None:
    broker = ScriptedBroker()
    for n in range(QUEUES):
        broker.queue(f"q{n}", messages=n % 7, nbytes=100 * (n % 7))
    api: InProcessAPI = await make_api(broker=broker, live_source=NothingLive(),
                                       history_interval=0.001)  # a history sample every poll
    for _ in range(3):  # entries made, heats scanned, tables filled
        await api.poll()
    gc.collect()  # what lives now is older than the poll below
    await api.poll()
    young = gc.get_objects(generation=0)
    assert len(young) < QUEUES / 10, sorted({type(o).__name__ for o in young})
