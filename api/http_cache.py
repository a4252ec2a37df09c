"""Encoded `GET /flow` answers, kept until what they show changes.

The hot path is a dict lookup and a bytes write: an answer is encoded once and served
until its stamp moves. The stamp is the engine entry's `revision` (every sample,
transition, threshold or staleness change moves it) with the producer registry's
revision for the queue (a new producer or capacity). Revisions come from counters that
never repeat, so a queue deleted and declared again can never be served the old body.
The cache belongs to the HTTP layer; domain objects carry no HTTP bytes.
"""

from __future__ import annotations

Stamp = tuple[int, int]
CacheKey = tuple[str, ...]  # a queue's key, or a queue's and a producer class's


class AnswerCache:
    """Bodies by queue, each valid for one stamp; at most `limit` queues (then it starts
    afresh, which also forgets queues that are gone)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._bodies: dict[CacheKey, tuple[Stamp, bytes]] = {}

    def get(self, key: CacheKey, stamp: Stamp) -> bytes | None:
        """The body cached for `key` at `stamp`, or None."""
        cached = self._bodies.get(key)
        return cached[1] if cached is not None and cached[0] == stamp else None

    def put(self, key: CacheKey, stamp: Stamp, body: bytes) -> None:
        """Keep `body` as the answer for `key` at `stamp`."""
        if len(self._bodies) >= self.limit and key not in self._bodies:
            self._bodies.clear()
        self._bodies[key] = (stamp, body)

    def __len__(self) -> int:
        return len(self._bodies)
