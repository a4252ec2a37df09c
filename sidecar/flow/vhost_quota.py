"""A virtual host's store quota: Broker-J's store overfull and underfull sizes, as pure rules.

Broker-J blocks every producer of a virtual host once its message store holds more than
`storeOverfullSize` bytes (MST-1008) and lets them go once it holds less than
`storeUnderfullSize` (MST-1009). RabbitMQ has no such quota; here the vhost's size is the
sum of its queues' depths (`message_bytes`, and `messages` for the optional message
quota), the same figures the queues' own thresholds use.

The hysteresis is exactly the queues' one (strictly above overfull: ON; strictly below
every underfull: OFF; an unset or 0 underfull means underfull = overfull), so the quota is
turned into `Thresholds` and stepped by `state_machine.step`: one machine, two scopes.
Validation follows Qpid's wording and, unlike a bad declare argument, refuses rather than
ignores: a quota is only ever set through the API, where a 422 can say what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import (
    DefaultPolicy,
    Dimension,
    Level,
    SourceProblem,
    Thresholds,
    level_from,
)

OVERFULL_SIZE = "overfullSize"
UNDERFULL_SIZE = "underfullSize"
OVERFULL_MESSAGES = "overfullMessages"
UNDERFULL_MESSAGES = "underfullMessages"
QUOTA_KEYS = (OVERFULL_SIZE, UNDERFULL_SIZE, OVERFULL_MESSAGES, UNDERFULL_MESSAGES)

QUOTA_SIZE = Dimension("size", OVERFULL_SIZE, UNDERFULL_SIZE, "bytes")
QUOTA_MESSAGES = Dimension("count", OVERFULL_MESSAGES, UNDERFULL_MESSAGES, "messages")
_NO_MAXIMUM = (QueueLimits(), DefaultPolicy(queue_limit=0))  # a vhost has no maximum


def _levels(values: Mapping[str, object]) -> tuple[dict[str, Level | None], list[SourceProblem]]:
    """Each dimension's level (None: not watched) and every reason to refuse the values."""
    levels: dict[str, Level | None] = {}
    problems: list[SourceProblem] = []
    for dim in (QUOTA_SIZE, QUOTA_MESSAGES):
        level, errors, ignored = level_from(values, dim, *_NO_MAXIMUM)
        problems.extend(errors)
        if ignored:  # an underfull size without an overfull one: say so, do not guess
            problems.append(SourceProblem(
                dim.resume_key, f"{dim.resume_key}={values[dim.resume_key]} needs "
                                f"{dim.stop_key}: there is no overfull level to resume from"))
        levels[dim.name] = level if level is not None and level.stop > 0 else None
    return levels, problems


def quota_problems(values: Mapping[str, object]) -> list[SourceProblem]:
    """Every reason to refuse a quota (a 422); [] to accept it.

    Values are integers >= 0; an underfull above its overfull is refused in Qpid's words
    (`underfullSize=600 must be less or equal to overfullSize=500`); an overfull of 0 means
    no limit in that dimension (Broker-J's default), and a quota must limit something.
    """
    levels, problems = _levels(values)
    if not problems and not any(levels.values()):
        problems.append(SourceProblem(
            OVERFULL_SIZE, f"a quota needs {OVERFULL_SIZE} or {OVERFULL_MESSAGES} above 0 "
                           "(DELETE the quota to remove it)"))
    return problems


def quota_thresholds(values: Mapping[str, object]) -> Thresholds:
    """The levels a valid quota sets, for `state_machine.step` (nothing watched if invalid)."""
    levels, problems = _levels(values)
    if problems:
        return Thresholds()
    return Thresholds(count=levels["count"], size=levels["size"])


def vhost_depths(depths: Iterable[tuple[str, Depth | None]]) -> dict[str, Depth]:
    """Each vhost's total depth from its queues' (vhost, depth) pairs; a queue without a
    sample yet counts as empty, and its vhost is still listed."""
    totals: dict[str, list[int]] = {}
    for vhost, depth in depths:
        total = totals.get(vhost)
        if total is None:
            total = totals[vhost] = [0, 0]
        if depth is not None:
            total[0] += depth.messages
            total[1] += depth.bytes or 0  # a stream's bytes are unknown: none counted
    return {vhost: Depth(*total) for vhost, total in totals.items()}
