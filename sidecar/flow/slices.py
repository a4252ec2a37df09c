"""Work over every queue cut into slices, so that the event loop answers `/flow` between them.

A poll of 10,000 queues is applied on the event loop (the engine is only ever touched
there), and so are the walks after it (history, sparklines, the live sampler's hot set):
each takes 20-300 ms in one go, which `/flow` would wait for. Such work is written as a
generator that yields every few queues, at a moment when everything it changed is whole;
`drain` runs it at once (tests, small brokers), `in_slices` gives the loop a turn whenever
a slice has held it for `slice_seconds`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")
Steps = Generator[None, None, T]
SLICE = 100  # queues between two yields: 1-3 ms of work, so a slice ends soon after its time


def drain(steps: Steps[T]) -> T:
    """Run the work to its end at once; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def in_slices(steps: Steps[T], slice_seconds: float) -> T:
    """Run the work, letting the event loop run whenever a slice held it for
    `slice_seconds`; its result."""
    held_since = time.perf_counter()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if time.perf_counter() - held_since >= slice_seconds:
            await asyncio.sleep(0)
            held_since = time.perf_counter()
