"""How a wake-up's writes are cut into steps: the event loop gets a turn every
`WAKE_SLICE_SECONDS`, and each step is one handover to the thread that writes beside the
loop's (`api.edge.paired_writes`). Figures: docs/benchmarks.md, "Long-poll wake-up"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sidecar.flow.slices import Steps

T = TypeVar("T")
WAKE_SLICE_SECONDS = 0.002  # the longest a wake-up's writes hold the event loop at a time
WRITES_PER_STEP = 128  # connections written between two looks at the clock


@dataclass(frozen=True)
class WakeUp:
    """The last wake-up of one kind: how many connections it wrote to, the seconds from
    the change to the last write handed to a transport, and the process's CPU seconds
    over the writes (far fewer than `seconds`: the process waited for a core)."""

    connections: int
    seconds: float
    cpu_seconds: float


def each_written(items: Sequence[T], write: Callable[[T], object],
                 first: Callable[[Sequence[T]], Sequence[T]] | None = None) -> Steps[None]:
    """`write(item)` for every item, as steps for `in_slices`. With `first`, a step is
    first handed to it (shared out to two threads: `api.edge.paired_writes`), and only
    the items it returns are written."""
    for start in range(0, len(items), WRITES_PER_STEP):
        step = items[start:start + WRITES_PER_STEP]
        for item in step if first is None else first(step):
            write(item)
        yield
