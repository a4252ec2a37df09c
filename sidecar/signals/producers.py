"""Which producers are sending to which queue, with what capacity; CHN-1005/1006 per producer.

Producers identify themselves on their flow requests (`X-Producer-Id`, and their windows
`X-Producer-Capacity` in messages and, optionally, `X-Producer-Capacity-Bytes`); the sums
feed the seed's capacity-window check (`capacity_window`). Over RabbitMQ producers keep
sending for as long as a stop takes to reach them (broker statistics lag + one poll), so
the registry also turns a publish rate into messages received meanwhile. A producer not
heard from for `ttl` seconds is no longer active, and one that says it left (its publisher
closed) is forgotten at once, on every queue; an answer to a request it made before
leaving (a long-poll still parked) does not bring it back. Each producer's first "stop"
answer of an episode is logged as CHN-1005 and its first "go" after that as CHN-1006, like
Broker-J's channel messages.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

from sidecar.model import QueueKey
from sidecar.records.log_lines import enforced_line, removed_line
from sidecar.signals.capacity_window import Window

log = logging.getLogger("flow_sidecar.producers")


#: How long a departure is remembered: longer than any long-poll can stay parked (the
#: API caps waits at 300 s), so a poll parked before the producer left cannot revive it.
REMEMBER_LEFT = 600.0


@dataclass
class Producer:
    """One producer of one queue."""

    capacity: int
    last_seen: float
    told_stopped: bool
    capacity_bytes: int | None = None


class ProducerRegistry:
    """Active producers per queue."""

    def __init__(self, ttl: float = 60.0, reaction_seconds: float = 0.0) -> None:
        self.ttl = ttl
        self.reaction_seconds = reaction_seconds
        self._by_queue: dict[QueueKey, dict[str, Producer]] = {}
        # per queue with producers: moves (to a never-used number) whenever the set of its
        # active producers or their capacities change, so answers can be cached until then
        self._revisions: dict[QueueKey, int] = {}
        self._counter = itertools.count(1)
        self._left: dict[str, float] = {}  # producer id -> when it said it left

    def revision(self, key: QueueKey) -> int:
        """Changes whenever the queue's active producers or their capacities change."""
        return self._revisions.get(key, 0)

    def seen(self, key: QueueKey, producer_id: str, capacity: int, told_stopped: bool,
             now: float, *, capacity_bytes: int | None = None,
             asked_at: float | None = None) -> bool:
        """Record a flow answer given to a producer; True when the queue's set of active
        producers or their capacities changed (its cached answer is then outdated).
        `asked_at` is when the request came in (a long-poll answers later): a request made
        before the producer left is ignored."""
        left_at = self._left.get(producer_id)
        if left_at is not None:
            if (now if asked_at is None else asked_at) <= left_at:
                return False
            del self._left[producer_id]  # back, with a new request
        producers = self._by_queue.setdefault(key, {})
        known = producers.get(producer_id)
        if known is None:
            producers[producer_id] = Producer(capacity, now, told_stopped, capacity_bytes)
            self._revisions[key] = next(self._counter)
            if told_stopped:
                log.info(enforced_line(producer_id, key[1]))
            return True
        changed = known.capacity != capacity or known.capacity_bytes != capacity_bytes
        if changed:
            self._revisions[key] = next(self._counter)
        known.capacity, known.capacity_bytes, known.last_seen = capacity, capacity_bytes, now
        if told_stopped != known.told_stopped:
            known.told_stopped = told_stopped
            log.info(enforced_line(producer_id, key[1]) if told_stopped
                     else removed_line(producer_id))
        return changed

    def active(self, key: QueueKey) -> dict[str, Producer]:
        """Producers of a queue heard from within the ttl (as of the last sweep)."""
        return self._by_queue.get(key, {})

    def queues(self) -> set[QueueKey]:
        """Queues with active producers (the live sampler keeps them hot)."""
        return set(self._by_queue)

    def capacity(self, key: QueueKey) -> int:
        """The summed message windows of the queue's active producers."""
        return sum(p.capacity for p in self.active(key).values())

    def window(self, key: QueueKey) -> Window:
        """The summed windows of the queue's active producers, in messages and bytes."""
        producers = self.active(key).values()
        declared = [p.capacity_bytes for p in producers if p.capacity_bytes is not None]
        return Window(sum(p.capacity for p in producers), sum(declared) if declared else None,
                      sum(1 for p in producers if p.capacity_bytes is None and p.capacity))

    def leave(self, producer_id: str, now: float) -> list[QueueKey]:
        """A producer that left (its publisher closed): forget it on every queue now, its
        window no longer counts and no CHN line follows; the queues it was producing to."""
        self._left[producer_id] = now
        gone = []
        for key, producers in list(self._by_queue.items()):
            if producers.pop(producer_id, None) is None:
                continue
            gone.append(key)
            self._revisions[key] = next(self._counter)
            if not producers:
                del self._by_queue[key]
                del self._revisions[key]
        return gone

    def during_reaction(self, publish_rate: float | None) -> int:
        """Messages a queue receives while a stop travels to its producers."""
        return math.ceil((publish_rate or 0.0) * self.reaction_seconds)

    def sweep(self, now: float) -> set[QueueKey]:
        """Forget producers silent for longer than the ttl; the queues that changed."""
        changed = set()
        for key, producers in list(self._by_queue.items()):
            for producer_id in [p for p, v in producers.items() if now - v.last_seen > self.ttl]:
                del producers[producer_id]
                changed.add(key)
                self._revisions[key] = next(self._counter)
            if not producers:
                del self._by_queue[key]
                del self._revisions[key]
        for producer_id in [p for p, at in self._left.items() if now - at > REMEMBER_LEFT]:
            del self._left[producer_id]
        return changed
