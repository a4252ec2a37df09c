"""One queue as the flow engine sees it, and what its thresholds are resolved from.

The engine (`sidecar.flow.engine`) owns these entries; readers get them through its read
side and must not change them. Each carries a `revision` that moves on every change of
what its answer shows, so a reader may cache what it built from it while that stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from sidecar.flow.depth_bound import DepthBound
from sidecar.flow.fill_rate import Episodes, Estimator, FillRate, WarningPolicy
from sidecar.flow.live_depth import (
    FROM_STATISTICS,
    DepthOrigin,
    LiveReading,
    newest_moment,
    resume_depth,
)
from sidecar.flow.pacing import Pacing
from sidecar.flow.queue_limits import QueueLimits, effective_limits
from sidecar.flow.state_machine import Depth, FlowState
from sidecar.flow.stop_reasons import StopReason
from sidecar.flow.thresholds import Resolution
from sidecar.model import QueueInfo, QueueKey

# shared by every new entry (frozen): no object per queue until its figures come
NO_FIGURES = Estimator()
NO_EPISODES = Episodes()
NO_WARNING_SETTINGS = WarningPolicy()


NOT_PACED = Pacing()  # shared by every queue that is not paced: no object per queue


def lacks_bytes(info: QueueInfo) -> bool:
    """A stream, or a broker that reports counts only (`QueueInfo.bytes_unreported`): the
    message count but never a byte count, so the size cannot be watched. (Other queues may
    report `messages` a round before `message_bytes`; their last byte count stands
    meanwhile.)"""
    return info.bytes_unreported is not None or (
        info.queue_type == "stream" and info.bytes is None)


def resolution_inputs(info: QueueInfo) -> tuple[object, ...]:
    """What a queue's thresholds are resolved from, besides settings and defaults."""
    return info.arguments, info.policy, lacks_bytes(info)


def limits_of(info: QueueInfo) -> QueueLimits:
    """The queue's limits: as its adapter read them, else from RabbitMQ's arguments and
    effective policy."""
    return info.limits or effective_limits(info.arguments, info.policy)


NO_CLASSES: Mapping[str, Fraction] = {}
NO_CLASS_STATES: Mapping[str, FlowState] = {}


@dataclass(slots=True)
class QueueEntry:
    """One queue the broker reported, as the engine currently sees it."""

    vhost: str
    name: str
    info: QueueInfo
    limits: QueueLimits
    resolution: Resolution
    state: FlowState
    version: int
    depth: Depth | None = None
    sampled_at: float | None = None
    stale: bool = True
    told_stopped: bool = False
    last_transition_at: float | None = None
    missed_polls: int = 0  # polls in a row that did not list it
    revision: int = 0  # moves on every change of what its answer shows; never reused
    stop_reasons: tuple[StopReason, ...] = ()  # why producers are told to stop; () = go
    origin: DepthOrigin = FROM_STATISTICS
    live: LiveReading | None = None  # its last live sample
    statistics_at: float | None = None  # the moment its statistics describe
    # a stopped queue restored from the store resumes only on figures of a later moment
    # (the process before may have seen the queue newer than a first poll's statistics)
    resume_after: float = -math.inf
    stopped_on: float = -math.inf  # the moment of the figure it last stopped on
    pacing: Pacing = NOT_PACED  # whether its producers are offered rates (`telling.pace`)
    bytes_per_message: float | None = None  # from the statistics, for live byte estimates
    # the newest upper bound of its messages (`bound`), as plain numbers: every poll moves
        # every queue's bound to a later moment, and 10,000 new objects a poll for the cyclic
    # garbage collector to walk hold `/flow` (docs/benchmarks.md#garbage-collection)
    bound_messages: int | None = None
    bound_at: float = 0.0
    # producer classes (`class_states`): the queue's, each class's machine, whether one is
    # stopped, the moment of the figure one last stopped on; shared empty maps when none
    producer_classes: Mapping[str, Fraction] = field(default_factory=lambda: NO_CLASSES)
    class_states: Mapping[str, FlowState] = field(default_factory=lambda: NO_CLASS_STATES)
    classes_held: bool = False
    class_stopped_on: float = -math.inf
    # the forecast (`sidecar.flow.forecast`, docs/graded-flow.md): the net fill rate, the
    # seconds to the nearest stop at it, whether the queue is warned, and what they come of
    fill: FillRate | None = None
    warned: bool = False
    seconds_to_stop: float | None = None
    warning_policy: WarningPolicy = NO_WARNING_SETTINGS
    estimator: Estimator = NO_FIGURES
    episodes: Episodes = NO_EPISODES
    # the estimator's figures are all equal, and no episode runs or the queue stays warned
    # in it: an equal figure adds nothing (`forecast`)
    flat: bool = False
    flat_until: float = -math.inf  # the newest moment a redate found them still equal
    # (vhost, name), made once: the per-queue tables of the engine's readers (hot set,
    # history, sparklines) are rebuilt every poll with these very objects as their keys
    key: QueueKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = (self.vhost, self.name)

    @property
    def bound(self) -> DepthBound | None:
        """The newest upper bound of its messages, if any."""
        if self.bound_messages is None:
            return None
        return DepthBound(self.bound_messages, self.bound_at)

    @bound.setter
    def bound(self, bound: DepthBound | None) -> None:
        self.bound_messages, self.bound_at = (None, 0.0) if bound is None else (
            bound.messages, bound.at)

    def resume_bound(self, stopped_on: float) -> Depth | None:
        """What alone may release what stopped at `stopped_on` (the queue, or one of its
        classes): an upper bound of its depth (`live_depth.resume_depth`) from figures of
        a moment after `resume_after`; None: stay stopped."""
        if newest_moment(self.statistics_at, self.live) <= self.resume_after:
            return None
        return resume_depth(self.info, self.statistics_at, self.live,
                            self.resolution.thresholds, max(self.resume_after, stopped_on))
