"""A queue's depth from two sources: the broker's statistics and live samples. Pure.

The statistics poll gives ready + unacknowledged messages and their bytes, but only as
fresh as the broker's last statistics refresh (RabbitMQ: 5 s by default). A live sample
gives the ready count as it is now, without bytes. The depth the state machine steps on:

- the newer source wins. A statistics figure is dated `statistics_as_of`: the poll's time
  less how far the broker's figures lag (`--broker-stats-lag`). A live sample taken after
  that outranks it, so an older statistics figure can never undo what a live sample
  showed (and flip a state on stale data); the poll then only refreshes the unacked count
  and the bytes per message the live depth is built from;
- the broker's real lag can be longer than that (at its default 5 s interval, figures
  show up to about 10 s late), so a statistics figure that would flip the state of a
  queue that has been read live waits while live depth works (`hold`): the queue is hot
  by that figure, and the next live sample, a round later, settles the state;
- live depth = the live ready count + the unacknowledged messages of the last statistics
  poll; its bytes are those messages times the last statistics' bytes per message
  (`bytesEstimated`), or the statistics' own bytes while no size per message is known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sidecar.flow.state_machine import Depth
from sidecar.model import QueueInfo


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
    """A queue's last live ready count and when it was read."""

    ready: int
    at: float


@dataclass(frozen=True)
class Merged:
    """The depth to step on, its origin, and the time it describes."""

    depth: Depth
    origin: DepthOrigin
    at: float


def bytes_per_message(info: QueueInfo, previous: float | None) -> float | None:
    """The statistics' mean message size; `previous` while they have no messages to tell."""
    if info.messages and info.bytes is not None:
        return info.bytes / info.messages
    return previous


def live_depth(ready: int, info: QueueInfo, size: float | None) -> tuple[Depth, DepthOrigin]:
    """Depth from a live ready count, the statistics' unacked count and mean size `size`."""
    messages = ready + (info.unacked or 0)
    if messages == info.messages or size is None:  # the statistics' bytes fit, or are all
        return Depth(messages, info.bytes), DepthOrigin(DepthSource.LIVE)
    return Depth(messages, round(messages * size)), DepthOrigin(DepthSource.LIVE, True)


def merged_depth(info: QueueInfo, live: LiveReading | None, size: float | None,
                 statistics_as_of: float, polled_at: float,
                 hold: Callable[[Depth], bool] | None = None) -> Merged | None:
    """The depth after a statistics poll at `polled_at`: the live reading while it is
    newer than the statistics, else the statistics. None: keep the depth there is, because
    neither has one, or because `hold` says the statistics' depth is to wait for a live
    sample (it would flip the state and a live sample can settle that)."""
    if live is not None and live.at > statistics_as_of:
        depth, origin = live_depth(live.ready, info, size)
        return Merged(depth, origin, live.at)
    if info.messages is None:
        return None
    depth = Depth(info.messages, info.bytes)
    if hold is not None and hold(depth):
        return None
    return Merged(depth, FROM_STATISTICS, polled_at)
