"""Pacing: the rate each registered producer is offered (`suggestedRate`, messages/s) so that
a queue's depth settles between its resume and stop thresholds instead of sawing between
them (issue 43). Pure: no I/O, no clock.

The controller is proportional around a target depth inside the band:

    total = drain + (target - depth) / time_constant

`drain` is the rate the consumers take, estimated as what the producers reported
publishing over the fill-rate window less the net fill rate over the same window. At the
target the producers together are offered exactly the drain; above it less, below it more,
closing the gap with the time constant. The queue then behaves as a first-order system
(depth' = (target - depth) / time_constant) whose figures arrive late: statistics refresh
every 5 s and are dated up to `--broker-stats-lag` back. A proportional loop on a delay D
is stable while D / time_constant < pi / 2 and does not overshoot while it is under 1 / e:
15 s keeps a 5 s delay at 1/3, and a 10 s one stable. Longer is smoother but lets an error
in the drain estimate move the depth further (by error x time_constant). The size
dimension is paced the same way, its correction turned into messages by the queue's mean
message size; the smallest total over the watched dimensions wins.

Pacing starts when the queue is warned or stopped, and ends once it has been neither, with
its depth under `release_fraction` of every resume, for `release_after` seconds: the
producers then send less than they are offered (a stop's undershoot alone does not end
it); or empty for `empty_release_after` seconds: the consumers wait for messages, which
no drain estimate can see (it then only follows what the producers send, so offers too
low after a stop would stay too low). A rate never releases anyone: while the queue is
stopped every suggested rate is 0, and a producer its class stops gets 0 and no share.
Shares are weighted max-min fair: a producer is offered at most `growth` times what it
reported (room to grow, no hoarding), and what it leaves goes to the others. Worked
example: docs/graded-flow.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.flow.fill_rate import FillRate
from sidecar.flow.state_machine import under_resume
from sidecar.model import Depth, Level, Thresholds


@dataclass(frozen=True)
class Tuning:
    """The controller's settings; the defaults are the ones the module docstring explains."""

    time_constant: float = 15.0  # seconds to close the gap to the target, by 1/e
    target_position: float = 0.5  # where the target sits from resume (0) to stop (1)
    stop_margin: float = 0.05  # and at least this fraction of the stop below it
    release_fraction: float = 0.5  # pacing ends under this fraction of every resume...
    release_after: float = 30.0  # ...held this long (a stop's undershoot is not enough)
    empty_release_after: float = 3.0  # or the queue empty this long: consumers wait
    growth: float = 1.25  # a producer may be offered this much more than it reported
    least_share: float = 0.25  # of its weighted equal share: room for a producer to start


@dataclass(frozen=True)
class Producer:
    """A registered producer as pacing sees it. `reported_rate` is what it says it
    published (messages/s; None: it did not say); `stopped` that its class is stopped."""

    id: str
    producer_class: str | None = None
    reported_rate: float | None = None
    weight: float = 1.0
    stopped: bool = False


def drain_rate(fill: FillRate, published: float) -> float:
    """The consumers' rate (messages/s) from what was published over the fill rate's window
    (`published`, messages, from `fill.since` to `fill.at`) and the net fill over it."""
    span = fill.at - fill.since
    return max(0.0, published / span - fill.messages) if span > 0 else 0.0


def target_depth(level: Level, tuning: Tuning = Tuning()) -> float:
    """Where pacing holds one dimension: inside [resume, stop], below the stop by a margin
    (a band of zero width, resume = stop, would otherwise put the target on the stop)."""
    inside = level.resume + tuning.target_position * (level.stop - level.resume)
    return min(inside, level.stop * (1 - tuning.stop_margin))


@dataclass(frozen=True)
class Pacing:
    """Whether a queue's producers are paced, since when nothing has called for it, and
    since when the queue has stood empty."""

    engaged: bool = False
    calm_since: float | None = None
    empty_since: float | None = None


def pace(state: Pacing, warned: bool, stopped: bool, depth: Depth, thresholds: Thresholds,
         at: float, tuning: Tuning = Tuning()) -> Pacing:
    """Pacing after one verdict dated `at` (see the module docstring): on while the queue is
    warned or stopped; off once it has been neither, with its depth under
    `release_fraction` of every resume, for `release_after` seconds, or empty for
    `empty_release_after` seconds."""
    if not thresholds.enabled:
        return Pacing()
    if warned or stopped:
        return Pacing(True)
    if not state.engaged:
        return state
    release = Thresholds(*(None if level is None else Level(
        level.stop, max(1, int(level.resume * tuning.release_fraction)))
        for level in (thresholds.count, thresholds.size)))
    if not under_resume(depth, release):
        return Pacing(True)
    since = at if state.calm_since is None else state.calm_since
    empty = (None if depth.messages != 0 else
             at if state.empty_since is None else state.empty_since)
    if at - since >= tuning.release_after or (
            empty is not None and at - empty >= tuning.empty_release_after):
        return Pacing()
    return Pacing(True, since, empty)


def _correction(level: Level | None, depth: int | None, per_message: float,
                tuning: Tuning) -> float | None:
    """One dimension's correction to the drain, in messages/s; None when not watched."""
    if level is None or depth is None:
        return None
    return (target_depth(level, tuning) - depth) / tuning.time_constant / per_message


def total_rate(drain: float, depth: Depth, thresholds: Thresholds,
               tuning: Tuning = Tuning()) -> float:
    """What all the producers together are offered, messages/s, never negative."""
    mean_size = depth.bytes / depth.messages if depth.messages and depth.bytes else None
    found = [c for c in (
        _correction(thresholds.count, depth.messages, 1.0, tuning),
        _correction(thresholds.size, depth.bytes if mean_size else None, mean_size or 1.0,
                    tuning)) if c is not None]
    return max(0.0, drain + min(found)) if found else 0.0


def shares(total: float, producers: Sequence[Producer],
           tuning: Tuning = Tuning()) -> dict[str, float]:
    """`total` split weighted max-min fair among the producers that may send; 0 for the
    others. Each is capped at its demand (`growth` x its reported rate, at least
    `least_share` of its weighted equal share); if every one is capped, what is left is
    spread by weight, so the total is always offered in full."""
    offered = {p.id: 0.0 for p in producers}
    hungry = [p for p in producers if not p.stopped and p.weight > 0]
    if not hungry or total <= 0:
        return offered
    weights = sum(p.weight for p in hungry)
    demand = {p.id: None if p.reported_rate is None else max(
        p.reported_rate * tuning.growth, tuning.least_share * total * (p.weight / weights))
        for p in hungry}
    left, open_ = total, list(hungry)
    while open_:
        weight = sum(p.weight for p in open_)
        capped = [p for p in open_ if (d := demand[p.id]) is not None and
                  d <= left * (p.weight / weight)]
        if not capped:
            for p in open_:
                offered[p.id] = left * (p.weight / weight)
            return offered
        for p in capped:
            offered[p.id] = demand[p.id] or 0.0
            left -= offered[p.id]
        open_ = [p for p in open_ if p not in capped]
    for p in hungry:  # every demand met: the rest by weight, so none is wasted
        offered[p.id] += left * (p.weight / weights)
    return offered


def suggested_rates(paced: bool, stopped: bool, drain: float, depth: Depth,
                    thresholds: Thresholds, producers: Sequence[Producer],
                    tuning: Tuning = Tuning()) -> dict[str, float]:
    """Every producer's `suggestedRate`: {} while the queue is not paced, all 0 while it is
    stopped, else its share of `total_rate`."""
    if not paced:
        return {}
    if stopped:
        return {p.id: 0.0 for p in producers}
    return shares(total_rate(drain, depth, thresholds, tuning), producers, tuning)
