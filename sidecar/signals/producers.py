"""Which producers are sending to which queue, with what capacity; CHN-1005/1006 per producer.

The seed's rule: a producer may have its capacity's worth of messages in flight when a
queue stops, so stop + the sum of active producers' capacities must fit under the queue's
maximum or the queue can still overflow. Over RabbitMQ the producers also keep sending
for as long as the stop takes to reach them (broker statistics lag + one poll), so the
check adds the queue's publish rate times that reaction time. Producers identify themselves on their flow
requests (`X-Producer-Id`, `X-Producer-Capacity`); a producer not heard from for `ttl`
seconds is no longer active. Each producer's first "stop" answer of an episode is logged
as CHN-1005 and its first "go" after that as CHN-1006, like Broker-J's channel messages.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

from sidecar.model import QueueKey
from sidecar.records.log_lines import enforced_line, removed_line

log = logging.getLogger("flow_sidecar.producers")


@dataclass
class Producer:
    """One producer of one queue."""

    capacity: int
    last_seen: float
    told_stopped: bool


@dataclass(frozen=True)
class OverflowRisk:
    """The queue can overflow before its producers block: stop + overshoot > max."""

    stop: int
    capacity: int
    during_reaction: int
    maximum: int

    def describe(self) -> str:
        lag = (f" + {self.during_reaction} published while the stop reaches them"
               if self.during_reaction else "")
        total = self.stop + self.capacity + self.during_reaction
        return (f"stop {self.stop} + active producers' capacity {self.capacity}{lag} = "
                f"{total} > max-length {self.maximum}")


def overflow_risk(stop: int | None, capacity: int, during_reaction: int,
                  maximum: int | None) -> OverflowRisk | None:
    """The seed's capacity-window check for one queue's count dimension."""
    overshoot = capacity + during_reaction
    if stop is None or maximum is None or overshoot == 0 or stop + overshoot <= maximum:
        return None
    return OverflowRisk(stop, capacity, during_reaction, maximum)


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

    def revision(self, key: QueueKey) -> int:
        """Changes whenever the queue's active producers or their capacities change."""
        return self._revisions.get(key, 0)

    def seen(self, key: QueueKey, producer_id: str, capacity: int, told_stopped: bool,
             now: float) -> bool:
        """Record a flow answer given to a producer; True when the queue's set of active
        producers or their capacities changed (its cached answer is then outdated)."""
        producers = self._by_queue.setdefault(key, {})
        known = producers.get(producer_id)
        if known is None:
            producers[producer_id] = Producer(capacity, now, told_stopped)
            self._revisions[key] = next(self._counter)
            if told_stopped:
                log.info(enforced_line(producer_id, key[1]))
            return True
        changed = known.capacity != capacity
        if changed:
            self._revisions[key] = next(self._counter)
        known.capacity, known.last_seen = capacity, now
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
        return sum(p.capacity for p in self.active(key).values())

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
        return changed
