"""A queue's depth from two sources, the broker's statistics and live samples, and which
of its figures may release producers. Pure.

Every figure is dated by the moment it describes, taken *before* the request that read it
was sent: a live sample by its passive declare; a statistics poll by its first request,
less how far the broker's figures lag (`--broker-stats-lag`, or more when the sidecar
measures more: `stats_lag`). The newest figure wins; an older one is dropped, so old
statistics never undo what a live sample showed.

The two directions are not judged alike (Qpid: flow "remains ON until" the depth is below
the resume, both thresholds satisfied):

- *towards stopped* any figure may move a queue, estimates included: the depth shown and
  stepped on while flowing is the newest figure; a live one is the live ready count plus
  the last statistics' unacknowledged count, and its bytes are the larger of the last
  statistics' real bytes and an estimate (messages x the statistics' mean size);
- *towards flowing* only an upper bound of the true depth at a known moment may move a
  queue (`resume_depth`): the statistics' own figures, or a live ready count plus an upper
  bound of the unacknowledged messages (`unacked_bound`: the statistics' unacked count
  plus the prefetch windows of the manual-ack consumers, when the queue has no more
  consumers than those the broker listed and none of them has an unlimited window). A
  live sample carries no bytes, so a queue whose size is watched resumes on statistics
  that describe a moment after its last live sample, unless the live bound says it is
  empty: an empty queue holds no bytes. The sampler reads a stopped queue live only when
  a live figure could release it (`live_can_release`); what the bound assumes
  (no `basic.get` with manual acknowledgement since the statistics) is in
  docs/live-depth.md.

A passive declare of a RabbitMQ quorum queue asks the queue's leader with a 250 ms
timeout and answers 0 messages on a timeout or an error (`rabbit_quorum_queue`), so such
an answer that took that long, or says 0 while the statistics say otherwise, is not a
sample (`trusted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from sidecar.flow.depth_bound import DepthBound
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Thresholds
from sidecar.model import LiveSample, QueueInfo

QUORUM_DECLARE_TIMEOUT = 0.25  # seconds: rabbit_quorum_queue's leader query timeout


class DepthSource(StrEnum):
    """Where a queue's current depth came from (`depthSource` in answers)."""

    STATISTICS = "statistics"
    LIVE = "live"


@dataclass(frozen=True)
class DepthOrigin:
    """Where the depth came from and whether its bytes are an estimate."""

    source: DepthSource
    bytes_estimated: bool = False


FROM_STATISTICS = DepthOrigin(DepthSource.STATISTICS)


@dataclass(frozen=True)
class LiveReading:
    """A queue's last live ready count, the moment it describes, and an upper bound of its
    messages at that moment (None: its unacknowledged messages have no known bound)."""

    ready: int
    at: float
    bound: int | None = None


@dataclass(frozen=True)
class Merged:
    """The depth to show and to stop on, its origin, and the moment it describes."""

    depth: Depth
    origin: DepthOrigin
    at: float


def bytes_per_message(info: QueueInfo, previous: float | None) -> float | None:
    """The statistics' mean message size; `previous` while they have no messages to tell."""
    if info.messages and info.bytes is not None:
        return info.bytes / info.messages
    return previous


def unacked_bound(info: QueueInfo, consumers: int | None = None) -> int | None:
    """An upper bound of the queue's unacknowledged messages at any moment after its
    statistics: those the statistics counted plus every listed manual-ack consumer's
    prefetch window. None when there is none: a window is unlimited, the consumers were
    not listed, or a live answer counts more consumers than were listed."""
    if info.unacked is None or info.unacked_limit is None or info.consumers is None:
        return None
    if consumers is not None and consumers > info.consumers:
        return None
    return info.unacked + info.unacked_limit


def trusted(sample: LiveSample, info: QueueInfo) -> bool:
    """Whether a live answer is a sample at all (see the module docstring: quorum queues
    answer 0 when their leader does not)."""
    if info.queue_type != "quorum" or sample.ready is None:
        return True
    if sample.took >= QUORUM_DECLARE_TIMEOUT:
        return False
    ready_in_statistics = (info.messages or 0) - (info.unacked or 0)
    return not (sample.ready == 0 and ready_in_statistics > 0)


def live_reading(sample: LiveSample, info: QueueInfo) -> LiveReading:
    """A trusted live sample with a ready count, as the engine keeps it."""
    assert sample.ready is not None
    extra = unacked_bound(info, sample.consumers)
    return LiveReading(sample.ready, sample.at, None if extra is None else sample.ready + extra)


def newest_moment(statistics_at: float | None, live: LiveReading | None) -> float:
    """The moment the newest of a queue's figures describes (-inf: none yet)."""
    return max(-math.inf if statistics_at is None else statistics_at,
               -math.inf if live is None else live.at)


def _live_is_newest(live: LiveReading | None, statistics_at: float | None) -> bool:
    return live is not None and (statistics_at is None or live.at > statistics_at)


def newest_depth(info: QueueInfo, statistics_at: float | None, live: LiveReading | None,
                 size: float | None) -> Merged | None:
    """The newest figure: a live reading newer than the statistics, else the statistics
    (dated `statistics_at`). None while neither has a depth."""
    if live is not None and _live_is_newest(live, statistics_at):
        messages = live.ready + (info.unacked or 0)
        if live.bound == 0:  # nothing on the queue, nor held by a consumer: 0 bytes too
            return Merged(Depth(0, 0), DepthOrigin(DepthSource.LIVE), live.at)
        real = info.bytes
        if messages == info.messages or real is None:
            return Merged(Depth(messages, real), DepthOrigin(DepthSource.LIVE), live.at)
        # without a mean size (the statistics never saw a message) the real bytes are of
        # another count: shown, but flagged, never as the broker's figure of this depth
        estimate = real if size is None else round(messages * size)
        if size is not None and estimate <= real:  # the real figure is larger: it stands
            return Merged(Depth(messages, real), DepthOrigin(DepthSource.LIVE), live.at)
        return Merged(Depth(messages, estimate), DepthOrigin(DepthSource.LIVE, True), live.at)
    if info.messages is None or statistics_at is None:
        return None
    return Merged(Depth(info.messages, info.bytes), FROM_STATISTICS, statistics_at)


def with_last_bytes(merged: Merged, last: Depth, origin: DepthOrigin) -> Merged:
    """`merged` (a figure without bytes) with the bytes last shown: none for an empty
    queue; flagged as an estimate unless they were the real bytes of this very count
    (issue 44: a queue holding messages was shown 0 real bytes). Never enough to resume
    on: `resume_depth` reads the broker's own figures."""
    messages = merged.depth.messages
    if not messages:
        return Merged(Depth(0, 0), merged.origin, merged.at)
    real = messages == last.messages and not origin.bytes_estimated
    return Merged(Depth(messages, last.bytes), DepthOrigin(merged.origin.source, not real),
                  merged.at)


def resume_depth(info: QueueInfo, statistics_at: float | None, live: LiveReading | None,
                 thresholds: Thresholds, after: float = float("-inf")) -> Depth | None:
    """An upper bound of the true depth, in every dimension the thresholds watch, at the
    moment of the newest figure, or at that of statistics newer than `after` (the stop)
    that a newer live count does not contradict; None when there is no such bound (then a
    stopped queue stays stopped)."""
    if live is not None and _live_is_newest(live, statistics_at):
        if live.bound is None:
            return None
        if live.bound == 0:
            return Depth(0, 0)
        if thresholds.size is None:
            return Depth(live.bound, None)
        # a live sample has no bytes; statistics from after the stop have: the queue was
        # under both resumes then if they say so, and the live bound says no more since
        if (statistics_at is None or statistics_at <= after or info.messages is None
                or info.bytes is None):
            return None
        return Depth(max(info.messages, live.bound), info.bytes)
    if info.messages is None or statistics_at is None:
        return None
    if thresholds.size is not None and info.bytes is None:
        # a count without bytes (a Prometheus poll between two byte reads) bounds the bytes
        # only when it is 0: an empty queue holds no bytes
        return Depth(0, 0) if info.messages == 0 else None
    return Depth(info.messages, info.bytes)


def newest_bound(info: QueueInfo, statistics_at: float | None,
                 live: LiveReading | None) -> DepthBound | None:
    """An upper bound of the queue's messages at the moment of its newest figure, or None
    (what the grant desk may settle credit against)."""
    if live is not None and _live_is_newest(live, statistics_at):
        return None if live.bound is None else DepthBound(live.bound, live.at)
    if info.messages is None or statistics_at is None:
        return None
    return DepthBound(info.messages, statistics_at)


def live_can_release(info: QueueInfo, thresholds: Thresholds) -> bool:
    """Whether a live sample could resume this stopped queue: the bound on its
    unacknowledged messages is 0 (a live ready count of 0 then shows it empty, bytes
    included, whatever it watches), or only its count is watched and that bound alone
    leaves room under the resume. Otherwise reading it live would only keep the
    statistics, which can, from being the newest figure."""
    extra = unacked_bound(info)
    if extra is None:
        return False
    return extra == 0 or (thresholds.size is None and thresholds.count is not None
                          and extra < thresholds.count.resume)
