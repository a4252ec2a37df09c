"""Long work on the event loop, cut into slices so `GET /flow` is answered between them.

The engine has no locks, so what reads it runs on the loop; and pure-Python work in a
worker thread would not free the loop anyway (it holds the GIL for 5 ms at a time). A
listing of 10,000 queues is therefore built a slice at a time, yielding to the loop after
each, so a producer's request waits for one slice at most, not for the whole listing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Out = TypeVar("Out")
SLICE = 250  # about a millisecond of building queue answers on this machine


async def in_slices(items: Sequence[Item], size: int = SLICE) -> AsyncIterator[Sequence[Item]]:
    """`items` a slice of `size` at a time, yielding to the event loop between slices."""
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        yield items[start:start + size]


async def map_in_slices(items: Sequence[Item], build: Callable[[Item], Out | None],
                        size: int = SLICE) -> list[Out]:
    """`build(item)` for every item that builds to something (not None), yielding to the
    event loop after every `size` items."""
    out: list[Out] = []
    async for part in in_slices(items, size):
        for item in part:
            built = build(item)
            if built is not None:
                out.append(built)
    return out
