"""A queue's net fill rate from its dated depth figures, the time left until a stop at that
rate, and the warning that says so before the stop (issue 43). Pure: no I/O, no clock.

The estimator keeps the figures of the last `window` seconds (statistics with bytes, live
samples with counts only), each dated by the moment it describes, and fits a least-squares
line through them: its slope is the net rate. A fit, not the difference of two figures,
because the broker refreshes its statistics every 5 s while the sidecar reads them every
second (a staircase), and live samples come with jitter; a fit over a window of several
refreshes follows the trend through both. Figures may arrive out of order or repeat a
moment: they are kept sorted, and two figures of one moment merge into the larger (the
safe side: a rate that overstates filling warns early, never late). Bytes are fitted on
the figures that have them. Rules and a worked example: docs/graded-flow.md.

A warning is advice: it never stops a producer. `track` turns the per-poll verdict into
episodes, one start and one end each, with a quiet period before the end so that a rate
hovering about the horizon does not flap.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction

from sidecar.flow.thresholds import SourceProblem, parse_fraction
from sidecar.model import Depth, Level, Thresholds

WARNING_HORIZON = "flow.warning_horizon"
WARNING_FRACTION = "flow.warning_fraction"
WARNING_KEYS = (WARNING_HORIZON, WARNING_FRACTION)
MAX_HORIZON = 86_400.0  # a day: a horizon past it warns on any queue that fills at all


@dataclass(frozen=True)
class DepthFigure:
    """A queue's depth at the moment `at` it describes; `bytes` None for a live sample."""

    at: float
    messages: int
    bytes: int | None = None


@dataclass(frozen=True)
class FillRate:
    """Net rates over the figures from `since` to `at`: positive while filling. `bytes` is
    None when fewer than two figures with bytes span `min_span`."""

    messages: float
    bytes: float | None
    since: float
    at: float


@dataclass(frozen=True)
class Estimator:
    """The figures one queue's rate is fitted on (sorted by moment, one per moment)."""

    window: float = 20.0  # seconds: four 5 s statistics refreshes
    min_span: float = 2.0  # seconds between the oldest and newest figure before any rate
    max_figures: int = 64  # live samples at 10/s would otherwise fill the window
    figures: tuple[DepthFigure, ...] = ()


def _merge(a: DepthFigure, b: DepthFigure) -> DepthFigure:
    """Two figures of one moment as one: the larger of each (order does not matter)."""
    sizes = [n for n in (a.bytes, b.bytes) if n is not None]
    return DepthFigure(a.at, max(a.messages, b.messages), max(sizes) if sizes else None)


def _moment(figure: DepthFigure) -> float:
    return figure.at


def add(estimator: Estimator, figure: DepthFigure) -> Estimator:
    """`estimator` with `figure` in it; figures older than the window (measured from the
    newest figure, not a clock) leave it."""
    figures = estimator.figures
    if figures and figure.at <= figures[-1].at:  # out of order or a repeated moment
        kept = {f.at: f for f in figures}
        kept[figure.at] = _merge(kept[figure.at], figure) if figure.at in kept else figure
        figures = tuple(sorted(kept.values(), key=_moment))
    else:  # the usual case, a newer figure: no dictionary, no sort (a fit per poll)
        figures = (*figures, figure)
    first = bisect_left(figures, figures[-1].at - estimator.window, key=_moment)
    return Estimator(estimator.window, estimator.min_span, estimator.max_figures,
                     figures[max(first, len(figures) - estimator.max_figures):])


def _slope(points: list[tuple[float, float]]) -> float:
    """The least-squares slope through `points` (at least two distinct moments), in one
    pass over moments and values taken from the first (small numbers: no cancellation)."""
    origin, base = points[0]
    st = sy = stt = sty = 0.0
    for t, y in points:
        t -= origin
        y -= base
        st += t
        sy += y
        stt += t * t
        sty += t * y
    n = len(points)
    return (n * sty - st * sy) / (n * stt - st * st)


def rate(estimator: Estimator) -> FillRate | None:
    """The net fill rate, or None until the figures span `min_span` seconds."""
    figures = estimator.figures
    if len(figures) < 2 or figures[-1].at - figures[0].at < estimator.min_span:
        return None
    sized = [(f.at, float(f.bytes)) for f in figures if f.bytes is not None]
    byte_rate = (_slope(sized) if len(sized) >= 2 and sized[-1][0] - sized[0][0] >=
                 estimator.min_span else None)
    return FillRate(_slope([(f.at, float(f.messages)) for f in figures]), byte_rate,
                    figures[0].at, figures[-1].at)


def _seconds(level: Level | None, depth: int | None, per_second: float | None) -> float | None:
    if level is None or depth is None or per_second is None or per_second <= 0:
        return None
    return max(0.0, (level.stop - depth) / per_second)


def seconds_to_stop(depth: Depth, fill: FillRate | None,
                    thresholds: Thresholds) -> float | None:
    """Seconds until the depth reaches the nearest watched stop at the current rate (0 at
    or over it); None while no watched dimension is filling, or without a rate."""
    if fill is None:
        return None
    found = [s for s in (_seconds(thresholds.count, depth.messages, fill.messages),
                         _seconds(thresholds.size, depth.bytes, fill.bytes)) if s is not None]
    return min(found) if found else None


@dataclass(frozen=True)
class WarningPolicy:
    """When a queue is warned: `horizon` seconds or less to its stop, or a depth of at least
    `fraction` of a stop (exactly, as written in decimal)."""

    horizon: float = 30.0
    fraction: Fraction = Fraction(9, 10)


def warning_problems(values: Mapping[str, object]) -> list[SourceProblem]:
    """Every reason to refuse warning settings (a 422 naming the key); [] to accept them.
    Absent keys are fine: the next source (vhost default, start-up) applies."""
    problems: list[SourceProblem] = []
    horizon = values.get(WARNING_HORIZON)
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(
            horizon, int | float) or not 0 <= horizon <= MAX_HORIZON):
        problems.append(SourceProblem(WARNING_HORIZON, f"{WARNING_HORIZON} must be a number "
                                      f"of seconds from 0 to {MAX_HORIZON:g}, got {horizon!r}"))
    fraction = values.get(WARNING_FRACTION)
    if fraction is not None:
        parsed = parse_fraction(WARNING_FRACTION, fraction)
        if isinstance(parsed, SourceProblem):
            problems.append(parsed)
    return problems


def warning_policy(*sources: Mapping[str, object] | None) -> WarningPolicy:
    """The policy from validated sources, highest first (queue, vhost default, start-up),
    each key from the first source that sets it; the built-in defaults last."""
    chosen: dict[str, object] = {}
    for values in sources:
        for key in WARNING_KEYS:
            if values is not None and key not in chosen and values.get(key) is not None:
                chosen[key] = values[key]
    policy = WarningPolicy()
    horizon, fraction = chosen.get(WARNING_HORIZON), chosen.get(WARNING_FRACTION)
    if isinstance(horizon, int | float):
        policy = replace(policy, horizon=float(horizon))
    parsed = parse_fraction(WARNING_FRACTION, fraction) if fraction is not None else None
    return replace(policy, fraction=parsed) if isinstance(parsed, Fraction) else policy


def _near(level: Level | None, depth: int | None, fraction: Fraction) -> bool:
    return level is not None and depth is not None and \
        depth * fraction.denominator >= level.stop * fraction.numerator


def warning(depth: Depth, to_stop: float | None, thresholds: Thresholds,
            policy: WarningPolicy) -> bool:
    """Whether the queue is warned now (see WarningPolicy). Never a stop."""
    if not thresholds.enabled:
        return False
    return (to_stop is not None and to_stop <= policy.horizon) or \
        _near(thresholds.count, depth.messages, policy.fraction) or \
        _near(thresholds.size, depth.bytes, policy.fraction)


class WarningKind(StrEnum):
    """The two events of a warning episode (SSE and webhook event names)."""

    STARTED = "warning"
    ENDED = "warning-cleared"


@dataclass(frozen=True)
class WarningEvent:
    """An episode started or ended at `at`; `episode` numbers them per queue from 1."""

    kind: WarningKind
    at: float
    episode: int
    started_at: float


@dataclass(frozen=True)
class Episodes:
    """What the tracker remembers about one queue between verdicts."""

    active: bool = False
    count: int = 0
    started_at: float = 0.0
    warned_at: float = 0.0  # the last moment the verdict was a warning
    last_at: float | None = None  # the newest verdict's moment


def track(state: Episodes, warned: bool, at: float,
          quiet: float = 15.0) -> tuple[Episodes, WarningEvent | None]:
    """Feed one verdict dated `at`: an episode starts on the first warning and ends only
    after `quiet` seconds without one (three 5 s statistics refreshes). A verdict older
    than the newest is ignored."""
    if state.last_at is not None and at < state.last_at:
        return state, None
    if warned:
        if state.active:
            return replace(state, warned_at=at, last_at=at), None
        new = Episodes(True, state.count + 1, at, at, at)
        return new, WarningEvent(WarningKind.STARTED, at, new.count, at)
    if state.active and at - state.warned_at >= quiet:
        return (replace(state, active=False, last_at=at),
                WarningEvent(WarningKind.ENDED, at, state.count, state.started_at))
    return replace(state, last_at=at), None


def numbered(state: Episodes, event: WarningEvent,
             floor: int) -> tuple[Episodes, WarningEvent]:
    """An episode that just started numbered after `floor` when that is as high as its own
    number: the count a restart kept, or the episodes other replicas recorded
    (`shared_view.counter_floor`), so the Nth episode is the Nth everywhere."""
    if event.kind is not WarningKind.STARTED or event.episode > floor:
        return state, event
    return replace(state, count=floor + 1), replace(event, episode=floor + 1)
