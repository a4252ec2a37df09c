"""Which queues to sample live, and in what order: the hot set. Pure: no I/O, no clock.

A live sample costs the broker a call, so samples go where a crossing can come soon,
closest first, at most `limit` per interval (the budget):

- hot: every flow-stopped queue that a live sample could release (its resume is the next
  crossing; `live_depth.live_can_release`: the others resume on statistics, which a live
  sample would only outrank); every queue with active producers; every other queue whose
  depth (the engine's, or the statistics' when they say otherwise), or that depth
  projected `horizon` seconds ahead at its net rate (publish minus deliver), is within
  `band` of its stop threshold. Queues without flow control, and streams (no live count),
  are never hot.
- distance: the share of the stop threshold the depth must still move to cross: up past
  the stop for a queue that is not stopped (0 once over it), down below the resume for
  a stopped one; per dimension, the nearest crossing for a stop (either dimension stops)
  and the farthest for a resume (both must be under).
- order: smallest distance first. A queue that waited counts as closer, its distance
  divided by 1 + the intervals it waited beyond one, so under a budget the far queues
  are still sampled, less often, while those at a crossing go every interval. Queues
  never sampled live go first, closest first among them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.model import QueueKey


@dataclass(frozen=True)
class HotPolicy:
    """How wide the hot set is and how time counts in it."""

    band: float  # a queue within this share of its stop threshold is hot
    horizon: float  # seconds a depth is projected ahead at its net rate
    interval: float  # seconds between live rounds (the unit of waiting)


@dataclass(frozen=True)
class Candidate:
    """What the choice needs to know about one queue."""

    key: QueueKey
    thresholds: Thresholds
    stopped: bool
    depth: Depth | None  # the depth the state machine last stepped on (None: none yet)
    statistics: Depth | None = None  # the statistics' figure, when it differs
    has_producers: bool = False
    net_rate: float = 0.0  # messages per second, publish minus deliver
    bytes_per_message: float | None = None
    last_sampled: float | None = None  # time of its last live sample
    stream: bool = False
    releasable: bool = True  # when stopped: whether a live sample could release it


def _to_stop(value: float, level: Level | None) -> float:
    """Share of the stop still to climb before `value` is over it (0 once over)."""
    return math.inf if level is None else max(0.0, (level.stop + 1 - value) / level.stop)


def _to_resume(value: float, level: Level | None) -> float:
    """Share of the stop still to fall before `value` is under the resume (0 once under)."""
    return 0.0 if level is None else max(0.0, (value - level.resume + 1) / level.stop)


def distance(c: Candidate, horizon: float) -> float | None:
    """How close the queue is to its next crossing (see the module docstring); None when
    it has no depth to measure from."""
    th = c.thresholds
    if c.stopped:
        if c.depth is None:
            return None
        fall = min(0.0, c.net_rate) * horizon
        return max(_to_resume(c.depth.messages + fall, th.count),
                   _to_resume((c.depth.bytes or 0) + fall * (c.bytes_per_message or 0), th.size))
    rise = max(0.0, c.net_rate) * horizon
    gaps = [min(_to_stop(d.messages + rise, th.count),
                _to_stop((d.bytes or 0) + rise * (c.bytes_per_message or 0), th.size))
            for d in (c.depth, c.statistics) if d is not None]
    return min(gaps) if gaps else None


def watchable(c: Candidate) -> bool:
    """Whether reading the queue live can tell anything: it has flow control and a live
    count (no stream), and, when stopped, a live sample could release it."""
    return not c.stream and c.thresholds.enabled and (c.releasable or not c.stopped)


def heat(c: Candidate, policy: HotPolicy) -> float | None:
    """The queue's distance when it is hot, None when it is not."""
    if not watchable(c):
        return None
    d = distance(c, policy.horizon)
    if c.stopped or c.has_producers:
        return 0.0 if d is None else d
    return d if d is not None and d <= policy.band else None


def is_hot(c: Candidate, policy: HotPolicy) -> bool:
    """True when the queue belongs in the hot set."""
    return heat(c, policy) is not None


def rank(hot: Iterable[tuple[QueueKey, float, float | None]], now: float, interval: float,
         limit: int) -> list[QueueKey]:
    """The `limit` most urgent of the hot queues, given as (key, heat, last sampled)."""
    ranked: list[tuple[float, float, float, QueueKey]] = []
    for key, d, last in hot:
        if last is None:
            ranked.append((0.0, d, -math.inf, key))
        else:
            waited = max(0.0, (now - last) / interval - 1)
            ranked.append((d / (1 + waited), d, last, key))
    return [key for *_, key in heapq.nsmallest(max(0, limit), ranked)]


def choose(candidates: Iterable[Candidate], now: float, policy: HotPolicy,
           limit: int) -> list[QueueKey]:
    """The hot queues to sample this round, at most `limit`, most urgent first."""
    return rank(((c.key, d, c.last_sampled) for c in candidates
                 if (d := heat(c, policy)) is not None), now, policy.interval, limit)
