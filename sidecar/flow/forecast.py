"""Each queue's forecast in its entry: the fill rate fitted on the figures the engine dates
(`fill_rate.add`), the seconds to its stop, whether it is warned, and its warning episodes
(`fill_rate.track`). `FigureIntake` feeds it; rules: docs/graded-flow.md.

Cost: a queue whose figures in the window are all equal (its rate is 0) and that has no
episode running (`QueueEntry.flat`) takes a poll that only dates its figures again for
nothing, no object made (`FigureIntake.redate`): the figures of a redate are those of the
`QueueInfo` that was fitted when it came, so they equal the rest. At 10,000 queues a figure per queue and poll would be 10,000 new
estimators a second for the collector to walk. The flat stretch enters the estimator before
the first figure that differs as its two ends inside the window (its newest moment is kept
in `flat_until`), so a queue that starts to fill has a rate from that figure on.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.flow.fill_rate import (
    DepthFigure,
    Estimator,
    WarningEvent,
    add,
    rate,
    seconds_to_stop,
    track,
    warning,
)
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import Depth, QueueKey


@dataclass(frozen=True)
class WarningNote:
    """A warning episode that started or ended, with what the queue showed then (for the
    log, events, metrics and history)."""

    key: QueueKey
    event: WarningEvent
    depth: Depth | None
    seconds_to_stop: float | None
    fill_rate: float | None


def shown_rate(per_second: float | None) -> float | None:
    """A rate as answers show it: to 0.1 (no answer churns on the fit's last digits)."""
    return None if per_second is None else round(per_second, 1) + 0.0  # no -0.0


def shown_seconds(seconds: float | None) -> float | None:
    """Seconds to stop as answers show them: to 0.1 s."""
    return None if seconds is None else round(seconds, 1)


def shown(entry: QueueEntry) -> tuple[float | None, float | None, float | None, bool]:
    """What an answer shows of the forecast: fillRate, fillRateBytes, secondsToStop,
    warning (a reader's cache stands while this does)."""
    fill = entry.fill
    return (None if fill is None else shown_rate(fill.messages),
            None if fill is None else shown_rate(fill.bytes),
            shown_seconds(entry.seconds_to_stop), entry.warned)


def _flat(estimator: Estimator) -> bool:
    """Every figure equal (counts, and bytes where known), spanning enough for a rate: 0."""
    figures = estimator.figures
    if len(figures) < 2 or figures[-1].at - figures[0].at < estimator.min_span:
        return False
    last = figures[-1]
    sized = {f.bytes for f in figures if f.bytes is not None}
    return all(f.messages == last.messages for f in figures) and len(sized) <= 1


def take(entry: QueueEntry, figure: DepthFigure) -> WarningEvent | None:
    """Fit `figure` in, then judge the queue again (`judge`)."""
    estimator = entry.estimator
    if entry.flat and entry.flat_until > estimator.figures[-1].at:
        last = estimator.figures[-1]
        for at in (max(last.at, figure.at - estimator.window), entry.flat_until):
            estimator = add(estimator, DepthFigure(at, last.messages, last.bytes))
    entry.estimator = add(estimator, figure)
    entry.flat = _flat(entry.estimator)
    entry.fill = rate(entry.estimator)
    return judge(entry, entry.estimator.figures[-1].at)


def judge(entry: QueueEntry, at: float) -> WarningEvent | None:
    """The seconds to stop and the warning on the entry's depth, rate, thresholds and
    policy, the verdict dated `at` into its episodes: the event of an episode that
    started or ended, else None."""
    thresholds = entry.resolution.thresholds
    depth = entry.depth
    if depth is None:
        return None
    entry.seconds_to_stop = (seconds_to_stop(depth, entry.fill, thresholds)
                             if thresholds.enabled else None)
    entry.warned = warning(depth, entry.seconds_to_stop, thresholds, entry.warning_policy)
    if entry.episodes.last_at is not None and at < entry.episodes.last_at:
        return None
    if not entry.warned and not entry.episodes.active:  # nothing to remember: no object
        return None
    entry.episodes, event = track(entry.episodes, entry.warned, at)
    if entry.episodes.active:  # its verdicts must go on being dated, to end it
        entry.flat = False
    return event
