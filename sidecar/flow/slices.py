"""Work over every queue cut into slices, so that the event loop answers `/flow` between them.

A poll of 10,000 queues is applied on the event loop (the engine is only ever touched
there), and so are the walks after it (history, sparklines, the live sampler's hot set):
each takes 20-300 ms in one go, which `/flow` would wait for. Such work is written as a
generator that yields every few queues, at a moment when everything it changed is whole;
`drain` runs it at once (tests, small brokers), `in_slices` gives the loop a turn whenever
a slice has held it for `slice_seconds`.

What reads the engine for an answer (a listing of 10,000 queues, a scrape) runs on the loop
too, since the engine has no locks and pure-Python work in a thread would hold the GIL
anyway: `by_parts` and `map_by_parts` hand it the items a part at a time, giving the loop
a turn between parts, so a producer's request waits for one part at most.

`collections_deferred` keeps Python's garbage collector out of a burst that must end soon
(a wake-up's writes to 10,000 connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
Item = TypeVar("Item")
Out = TypeVar("Out")
Steps = Generator[None, None, T]
SLICE = 25  # queues between two yields: a fraction of a millisecond, so a slice ends soon
# after its time (100 took 1-3 ms: a slice then held the loop up to 5 ms)
PART = 250  # items of an answer between two turns of the loop: about a millisecond of work
GIVE_WAY_TURNS = 3  # turns of the loop between two slices (`give_way`)


_deferring = 0  # bursts under way that keep collections out (all on the event loop)
_collector_was_on = False


@contextlib.contextmanager
def collections_deferred() -> Iterator[None]:
    """No automatic garbage collection until the block ends (nor while another such block
    runs). 10,000 parked long polls are some 100,000 young objects, and a collection that
    fell inside a wake-up's writes would hold the last connections as long as it walks
    them (docs/benchmarks.md, "Long-poll wake-up"). What the block allocates meanwhile is
    collected after it, as usual."""
    global _deferring, _collector_was_on
    if _deferring == 0:
        _collector_was_on = gc.isenabled()
        gc.disable()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if _deferring == 0 and _collector_was_on:
            gc.enable()


def drain(steps: Steps[T]) -> T:
    """Run the work to its end at once; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def give_way() -> None:
    """Let the event loop answer what arrived before this task goes on. One turn of the
    loop reads a request and queues its task, but behind this one, which would run its
    next slice first: a `/flow` request that came during a slice waited for that slice and
    the next. So this task waits out GIVE_WAY_TURNS turns: the request's task runs in the
    second on uvloop (what uvicorn runs on), in the third on asyncio's own loop, where the
    read wakes the reader one turn later (docs/benchmarks.md, "Ten thousand queues").
    `tests/unit/test_slices.py` checks both loops."""
    for _ in range(GIVE_WAY_TURNS):
        await asyncio.sleep(0)


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
            await give_way()
            held_since = time.perf_counter()


async def by_parts(items: Sequence[Item], size: int = PART) -> AsyncIterator[Sequence[Item]]:
    """`items` a part of `size` at a time, yielding to the event loop between parts."""
    for start in range(0, len(items), size):
        if start:
            await give_way()
        yield items[start:start + size]


async def map_by_parts(items: Sequence[Item], build: Callable[[Item], Out | None],
                       size: int = PART) -> list[Out]:
    """`build(item)` for every item that builds to something (not None), yielding to the
    event loop after every `size` items."""
    out: list[Out] = []
    async for part in by_parts(items, size):
        for item in part:
            built = build(item)
            if built is not None:
                out.append(built)
    return out
