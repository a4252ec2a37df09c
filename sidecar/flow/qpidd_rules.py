"""The thresholds a Qpid C++ broker applies to a queue, by qpidd's own rules. Pure.

`thresholds.resolve` is the contract (SPEC §3) where the sidecar runs the flow machine
itself. On a Qpid C++ broker the broker runs it, and what `/flow` shows must be what the
broker enforces, so this module mirrors `QueueFlowLimit::createLimit` (qpid-cpp
src/qpid/broker/QueueFlowLimit.cpp) step by step:

1. a ring queue (`qpid.policy_type=ring`) gets no flow control at all, even with explicit
   `qpid.flow_*` arguments;
2. all four values are pre-filled from the default ratios of the queue's maxima
   (`qpid.max_count`, else none; `qpid.max_size`, else `--default-queue-limit`), in
   double arithmetic: stop = (uint)(max × ratio/100.0 + 0.5), resume = (uint)(max ×
   ratio/100.0);
3. each `qpid.flow_*` argument given overrides its pre-filled value, a resume given
   without any stop included (qpidd logs that it is ignored, then uses it);
4. if a stop is non-zero, each dimension is validated: resume > stop is refused, a resume
   of 0 becomes the stop, a stop above a non-zero maximum is refused, with qpidd's words.

Where this differs from the contract is listed in docs/qpid.md (D1-D7) and pinned
by tests/qpid/, which run both against a real qpidd.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sidecar.flow.queue_limits import (
    QPID_COUNT_MAX,
    QPID_NAMES,
    QPID_SIZE_MAX,
    QueueLimits,
    qpid_uint,
)
from sidecar.flow.thresholds import (
    COUNT,
    DIMENSIONS,
    FLOW_KEYS,
    SIZE,
    DefaultPolicy,
    Dimension,
    Level,
    Resolution,
    Source,
    Thresholds,
)


@dataclass(frozen=True)
class Prefilled:
    """One dimension's values as qpidd holds them before validation."""

    stop: int
    resume: int
    maximum: int  # 0: no maximum in this dimension
    maximum_name: str


def prefilled(dim: Dimension, limits: QueueLimits, policy: DefaultPolicy) -> Prefilled:
    """qpidd's values for one dimension before any declare argument overrides them."""
    if dim is COUNT:
        maximum, name = limits.max_length or 0, QPID_NAMES.count
    else:
        size = limits.max_length_bytes
        maximum = size if size is not None else policy.queue_limit
        name = QPID_NAMES.size
    # qpidd computes these in double precision: 57% of 100 gives a resume of 56, not 57.
    stop = int(maximum * (policy.stop_percent / 100.0) + 0.5) if policy.stop_percent else 0
    resume = int(maximum * (policy.resume_percent / 100.0)) if policy.resume_percent else 0
    return Prefilled(stop, resume, maximum, name)


def _declared(arguments: Mapping[str, object], dim: Dimension, key: str) -> int | None:
    """A declared value, converted as qpidd converts it (decimal strings included); a
    value qpidd could not convert never gets here (qpidd refuses that declare), so it is
    read as not given."""
    return qpid_uint(arguments.get(key), QPID_COUNT_MAX if dim is COUNT else QPID_SIZE_MAX)


def _validate(dim: Dimension, values: Prefilled) -> tuple[Level | None, str | None]:
    """qpidd's validateFlowConfig for one dimension: the level, or the refusal."""
    stop, resume = values.stop, values.resume
    if not stop:
        return None, None
    if resume > stop:
        return None, (f"{dim.resume_key}={resume} must be less or equal to "
                      f"{dim.stop_key}={stop}")
    if values.maximum and values.maximum < stop:
        return None, (f"{dim.stop_key}={stop} must be less than "
                      f"{values.maximum_name}={values.maximum}")
    return Level(stop, resume or stop), None


def _source(dim: Dimension, arguments: Mapping[str, object], level: Level | None) -> Source:
    if level is not None:
        return Source.ARGUMENTS if dim.stop_key in arguments else Source.DEFAULT
    return Source.DISABLED if dim.stop_key in arguments else Source.NONE


def qpidd_resolution(
    arguments: Mapping[str, object], limits: QueueLimits, policy: DefaultPolicy
) -> Resolution:
    """The thresholds qpidd applies to a queue declared with `arguments`, or, in `errors`,
    the refusal qpidd gives such a declare (without its `Queue "name": ` prefix)."""
    given = [key for key in FLOW_KEYS if key in arguments]
    if limits.ring:
        note = f"{', '.join(given)} ignored: qpidd applies no flow control to a ring queue"
        notes = (note,) if given else ()
        return Resolution(Thresholds(), Source.NONE, Source.NONE, warnings=notes)
    warnings: list[str] = []
    declared: dict[str, Prefilled] = {}
    for dim in DIMENSIONS:
        values = prefilled(dim, limits, policy)
        stop = _declared(arguments, dim, dim.stop_key)
        resume = _declared(arguments, dim, dim.resume_key)
        declared[dim.name] = Prefilled(
            values.stop if stop is None else stop,
            values.resume if resume is None else resume,
            values.maximum, values.maximum_name)
    if not any(k in arguments for k in (d.stop_key for d in DIMENSIONS)) and given:
        warnings.append("user-configured flow limits are ignored as no stop limits provided "
                        "(qpidd's words; it applies the resume given all the same)")
    if not any(p.stop for p in declared.values()):
        return Resolution(Thresholds(), _source(COUNT, arguments, None),
                          _source(SIZE, arguments, None), warnings=tuple(warnings))
    levels: dict[str, Level | None] = {}
    for dim in DIMENSIONS:
        level, refusal = _validate(dim, declared[dim.name])
        if refusal is not None:  # qpidd refuses the declare at the first problem
            return Resolution(Thresholds(), Source.NONE, Source.NONE, errors=(refusal,))
        values = declared[dim.name]
        if level is None and values.resume:
            warnings.append(
                f"{dim.resume_key}={values.resume} still holds flow on: qpidd keeps the resume "
                f"of a dimension whose stop is 0, and resumes only below it")
        levels[dim.name] = level
    count, size = levels["count"], levels["size"]
    return Resolution(
        thresholds=Thresholds(count=count, size=size),
        count_source=_source(COUNT, arguments, count),
        size_source=_source(SIZE, arguments, size),
        warnings=tuple(warnings),
    )
