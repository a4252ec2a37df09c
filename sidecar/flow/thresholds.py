"""Threshold resolution: which flow stop/resume values apply to a queue, and why.

Qpid gives every queue a stop and a resume threshold in two dimensions, message count and
bytes. Values come from three sources, highest first, chosen independently per dimension:

1. settings stored through our API (`api`),
2. the queue's `qpid.flow_*` declare arguments (`arguments`),
3. its vhost's default thresholds, Broker-J's virtual-host `capacity` and
   `flowResumeCapacity` (`vhost`; not for RING queues, like any default),
4. defaults computed from the queue's maximum and the broker-wide percentages (`default`).

A source with an invalid value for a dimension is skipped for that dimension and the error
is reported, so a bad declare argument never disables flow control silently. Validation
follows qpidd's rules and wording. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from sidecar.flow.queue_limits import QueueLimits
from sidecar.model import Level, Resolution, Source, Thresholds

# the value types are sidecar.model's; re-exported for the modules that import them here
__all__ = [
    "COUNT",
    "DIMENSIONS",
    "FLOW_KEYS",
    "MAX_VALUE",
    "RESUME_COUNT",
    "RESUME_SIZE",
    "SIZE",
    "STOP_COUNT",
    "STOP_SIZE",
    "DefaultPolicy",
    "Dimension",
    "Level",
    "Resolution",
    "Source",
    "SourceProblem",
    "Thresholds",
    "default_level",
    "level_from",
    "maximum",
    "parse_fraction",
    "parse_value",
    "resolve",
    "unwatched_size",
    "validate_settings",
]

STOP_COUNT = "qpid.flow_stop_count"
RESUME_COUNT = "qpid.flow_resume_count"
STOP_SIZE = "qpid.flow_stop_size"
RESUME_SIZE = "qpid.flow_resume_size"
FLOW_KEYS = (STOP_COUNT, RESUME_COUNT, STOP_SIZE, RESUME_SIZE)
MAX_VALUE = 2**63 - 1  # what SQLite and the broker's signed 64-bit table values can hold


@dataclass(frozen=True)
class Dimension:
    """One of the two measures of queue depth Qpid thresholds apply to."""

    name: str
    stop_key: str
    resume_key: str
    unit: str


COUNT = Dimension("count", STOP_COUNT, RESUME_COUNT, "messages")
SIZE = Dimension("size", STOP_SIZE, RESUME_SIZE, "bytes")
DIMENSIONS = (COUNT, SIZE)


@dataclass(frozen=True)
class DefaultPolicy:
    """The broker-wide options qpidd calls --default-flow-{stop,resume}-threshold and
    --default-queue-limit: percentages of a queue's maximum, and the byte maximum of
    queues that set none (0 = no limit)."""

    stop_percent: int = 80
    resume_percent: int = 70
    queue_limit: int = 104857600

    @property
    def disabled(self) -> bool:
        """Both percentages 0 turn default flow control off broker-wide (qpidd's rule)."""
        return self.stop_percent == 0 and self.resume_percent == 0

    def as_flags(self) -> str:
        """The options as qpidd's flags, for log lines."""
        return (f"--default-flow-stop-threshold={self.stop_percent} "
                f"--default-flow-resume-threshold={self.resume_percent} "
                f"--default-queue-limit={self.queue_limit}")

    def problems(self) -> list[str]:
        """Why these options must be refused at start-up (or through the API); [] if fine."""
        found = []
        for flag, value in (
            ("--default-flow-stop-threshold", self.stop_percent),
            ("--default-flow-resume-threshold", self.resume_percent),
            ("--default-queue-limit", self.queue_limit),
        ):
            if value < 0:
                found.append(f"{flag}={value} must be 0 or more")
        if self.stop_percent > 100:
            found.append(f"--default-flow-stop-threshold={self.stop_percent} must be at most 100")
        if self.resume_percent > self.stop_percent:
            found.append(
                f"--default-flow-resume-threshold={self.resume_percent} must be less or equal "
                f"to --default-flow-stop-threshold={self.stop_percent}"
            )
        return found


@dataclass(frozen=True)
class SourceProblem:
    """A value one source gave that cannot be used; `key` names the offending setting."""

    key: str
    message: str


_DISABLED = Level(0, 0)  # marker: the source switched this dimension off


_DECIMAL = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also takes '²' and '٣'


def parse_value(key: str, value: object) -> int | SourceProblem:
    """A threshold value as an int, or why it is refused.

    Integers, and strings of decimal digits: RabbitMQ's management UI declares unknown
    arguments as strings unless told otherwise, and qpidd itself parses integer strings
    in its queue arguments. Anything else (signs, spaces, fractions, booleans) is refused.
    """
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return SourceProblem(key, f"{key} must be an integer >= 0, got {value!r}")
    if value < 0:
        return SourceProblem(key, f"{key}={value} must be an integer >= 0")
    if value > MAX_VALUE:
        return SourceProblem(key, f"{key}={value} must be at most {MAX_VALUE}")
    return value


def parse_fraction(key: str, value: object) -> Fraction | SourceProblem:
    """A fraction in (0, 1] exactly as written in decimal (0.29 is 29/100, not the binary
    float just under it, so thresholds derived from it round as the operator expects), or
    why it is refused. Numbers only: a string, a boolean, NaN or infinity is refused."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return SourceProblem(key, f"{key} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        return SourceProblem(key, f"{key}={value} must be more than 0 and at most 1")
    return Fraction(repr(value))


def maximum(dim: Dimension, limits: QueueLimits, policy: DefaultPolicy) -> tuple[int | None, str]:
    """The queue's maximum in one dimension, and the name of what set it (for messages)."""
    if dim is COUNT:
        return limits.max_length, limits.names.count
    if limits.max_length_bytes is not None:
        return limits.max_length_bytes, limits.names.size
    return (policy.queue_limit or None), limits.names.default_size


def level_from(
    values: Mapping[str, object], dim: Dimension, limits: QueueLimits, policy: DefaultPolicy
) -> tuple[Level | None, list[SourceProblem], list[str]]:
    """Validate one source's values for one dimension.

    Returns the level it sets (`_DISABLED` for a stop of 0, None when it sets nothing),
    the errors that make it unusable, and warnings about values it ignores.
    """
    parsed: list[int | None] = []
    errors = []
    for key in (dim.stop_key, dim.resume_key):
        raw = values.get(key)
        value = None if raw is None else parse_value(key, raw)
        if isinstance(value, SourceProblem):
            errors.append(value)
        else:
            parsed.append(value)
    if errors:
        return None, errors, []
    stop, resume = parsed
    if stop is None:
        if resume is not None:
            return None, [], [f"{dim.resume_key}={resume} ignored: no {dim.stop_key} is set"]
        return None, [], []
    if stop == 0:
        return _DISABLED, [], []
    resume_value = resume or stop  # Qpid: a resume of 0 or unset means resume = stop
    if resume_value > stop:
        return None, [SourceProblem(
            dim.resume_key,
            f"{dim.resume_key}={resume_value} must be less or equal to {dim.stop_key}={stop}",
        )], []
    limit, limit_name = maximum(dim, limits, policy)
    if limit is not None and stop > limit:
        return None, [SourceProblem(
            dim.stop_key,
            # qpidd's words, although a stop equal to the maximum is accepted (by both)
            f"{dim.stop_key}={stop} must be less than {limit_name}={limit}",
        )], []
    return Level(stop, resume_value), [], []


def default_level(limit: int | None, policy: DefaultPolicy) -> Level | None:
    """qpidd's default thresholds for a maximum: stop rounded half up, resume floored; a
    resume that floors to 0 means resume = stop, as for any other source (a resume of 0
    taken literally could never be reached: depth is never below 0)."""
    if limit is None or limit <= 0 or policy.disabled:
        return None
    stop = (limit * policy.stop_percent * 2 + 100) // 200
    resume = limit * policy.resume_percent // 100
    return Level(stop, resume or stop) if stop > 0 else None


def validate_settings(
    values: Mapping[str, object], limits: QueueLimits | None, policy: DefaultPolicy
) -> list[SourceProblem]:
    """Every reason to refuse a set of settings (422 through the API); [] to accept them.

    Without known limits (the queue does not exist yet) only the value rules apply; the
    maximum is checked again when the queue appears.
    """
    known = limits if limits is not None else QueueLimits()
    probe = policy if limits is not None else DefaultPolicy(queue_limit=0)
    problems: list[SourceProblem] = []
    for dim in DIMENSIONS:
        problems.extend(level_from(values, dim, known, probe)[1])
    return problems


def resolve(
    api: Mapping[str, object] | None,
    arguments: Mapping[str, object],
    limits: QueueLimits,
    policy: DefaultPolicy,
    vhost: Mapping[str, object] | None = None,
) -> Resolution:
    """Resolve a queue's thresholds per dimension from the API, its arguments, its vhost's
    defaults and the broker-wide defaults."""
    chosen: dict[str, tuple[Level | None, Source]] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for dim in DIMENSIONS:
        picked: tuple[Level | None, Source] | None = None
        for source, values in ((Source.API, api), (Source.ARGUMENTS, arguments),
                               (Source.VHOST, None if limits.ring else vhost)):
            if values is None:
                continue
            level, problems, notes = level_from(values, dim, limits, policy)
            errors.extend(f"{source}: {p.message}" for p in problems)
            warnings.extend(f"{source}: {note}" for note in notes)
            if level is _DISABLED:
                picked = (None, Source.DISABLED)
                break
            if level is not None:
                picked = (level, source)
                break
        if picked is None:
            level = None if limits.ring else default_level(maximum(dim, limits, policy)[0], policy)
            picked = (level, Source.DEFAULT if level is not None else Source.NONE)
        chosen[dim.name] = picked
    return Resolution(
        thresholds=Thresholds(count=chosen["count"][0], size=chosen["size"][0]),
        count_source=chosen["count"][1],
        size_source=chosen["size"][1],
        errors=tuple(errors),
        warnings=tuple(warnings),
    )


def unwatched_size(resolution: Resolution, why: str) -> Resolution:
    """`resolution` with its size dimension not watched, and a warning that says `why`.

    For queues whose byte count the broker does not report (RabbitMQ's streams): a size
    threshold shown as active there could never trigger, a protection that is not there.
    A disabled or absent size dimension is left as it is: it promised nothing.
    """
    level = resolution.thresholds.size
    if level is None:
        return resolution
    note = (f"{resolution.size_source}: {STOP_SIZE}={level.stop} not watched: {why}")
    return replace(resolution, thresholds=replace(resolution.thresholds, size=None),
                   size_source=Source.NONE, warnings=(*resolution.warnings, note))
