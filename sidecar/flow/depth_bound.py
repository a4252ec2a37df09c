"""An upper bound of a queue's message count at a known moment. Pure value type.

Only such a figure may move a queue towards *flowing* or free credit: the depth the engine
steps on may be an estimate (a live ready count plus older unacknowledged counts, bytes
from a mean size), which may only move a queue towards *stopped*. The engine keeps the
newest bound per queue (`QueueEntry.bound`); the grant desk settles spent credit on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DepthBound:
    """At the moment `at` (seconds since the epoch, taken before the request that read it
    was sent; for statistics, less their lag) the queue held at most `messages`."""

    messages: int
    at: float
