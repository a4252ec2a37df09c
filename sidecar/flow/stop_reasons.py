"""Why producers are told to stop: the queue's own state, or something broker-wide.

Producers of a queue must pause for any of four reasons, and operators need to tell them
apart: the queue's own Qpid thresholds (`queue`), `--on-stale stop` while the broker
cannot be read (`stale`), the vhost's store quota, Broker-J's MST-1008 (`vhost-quota`),
or a RabbitMQ memory or disk alarm, which blocks every publisher of the cluster
(`broker-alarm`). `combine` is the one rule that decides what a queue is told from these;
the engine stores its result on each entry, so `/flow` can say why. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

OnStale = Literal["hold", "stop", "go"]


class StoppedBy(StrEnum):
    """What stops a queue's producers, as `/flow` names it in `flowStoppedBy`."""

    QUEUE = "queue"
    STALE = "stale"
    VHOST_QUOTA = "vhost-quota"
    BROKER_ALARM = "broker-alarm"


@dataclass(frozen=True, order=True)
class StopReason:
    """One reason to stop, with a sentence for people. The detail stays the same for a
    whole episode (no live figures in it), so a reason that holds does not move a queue's
    version on every poll."""

    by: StoppedBy
    detail: str


BROKER_WIDE = (StoppedBy.VHOST_QUOTA, StoppedBy.BROKER_ALARM)


OWN = StopReason(StoppedBy.QUEUE, "queue overfull (QUE-1003): above a flow stop threshold, "
                                 "until below every resume threshold")
STALE_STOP = StopReason(StoppedBy.STALE, "no fresh broker sample within --stale-after; "
                                         "--on-stale stop")


def combine(own_stopped: bool, stale: bool, on_stale: OnStale,
            broker_wide: tuple[StopReason, ...]) -> tuple[StopReason, ...]:
    """Every reason a queue's producers must stop now; () means they may send.

    Stale data under `--on-stale stop|go` decides alone: the vhost quota and the alarms
    were read from the same unreachable broker, so they are as stale as the queue's
    depth. Otherwise the queue's own state and every broker-wide reason add up: each one
    alone stops producers, as on Broker-J, where a queue overfull and a store overfull
    block independently.
    """
    if stale and on_stale != "hold":
        return (STALE_STOP,) if on_stale == "stop" else ()
    own = (OWN,) if own_stopped else ()
    return own + broker_wide


def broker_wide_part(reasons: tuple[StopReason, ...]) -> tuple[StopReason, ...]:
    """The reasons that come from outside the queue (vhost quota, broker alarms)."""
    return tuple(r for r in reasons if r.by in BROKER_WIDE)


def describe_change(before: tuple[StopReason, ...], after: tuple[StopReason, ...]) -> str:
    """What changed between two sets of broker-wide reasons, for a change's `reason`."""
    started = [r.detail for r in after if r not in before]
    ended = [f"cleared: {r.detail}" for r in before if r not in after]
    return "; ".join(started + ended)
