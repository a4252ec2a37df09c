"""How a poll's or a live reading's figures enter a queue's entry: the newest of them
shown, with its upper bound and moment (`live_depth`), and the broker's statistics lag
measured and used to date a poll (`stats_lag`). `FlowEngine` owns one; it steps the
queues on what this took in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sidecar.flow import forecast
from sidecar.flow.fill_rate import DepthFigure, Episodes, WarningEvent, WarningKind, numbered
from sidecar.flow.live_depth import (
    Merged,
    bytes_per_message,
    live_reading,
    newest_bound,
    newest_depth,
    trusted,
    with_last_bytes,
)
from sidecar.flow.queue_entry import NO_EPISODES, QueueEntry, lacks_bytes
from sidecar.flow.stats_lag import LagMeter
from sidecar.flow.telling import Telling
from sidecar.model import LiveSample, QueueInfo, QueueKey
from sidecar.records.log_lines import warning_line

log = logging.getLogger("flow_sidecar.flow")


class FigureIntake:
    """Takes figures into entries; see the module docstring."""

    def __init__(self, told: Telling, statistics_lag: float) -> None:
        self.told = told
        # how old the broker's statistics are when read (the option, or more when measured:
        # `sidecar.flow.stats_lag`): a poll's figures describe the moment its first request
        # was sent less this, and a live sample of a later moment outranks them
        self.statistics_lag = statistics_lag
        self.configured_lag = statistics_lag  # --broker-stats-lag
        self.lag_meter = LagMeter()
        self._lag_warned: float | None = None  # the measured lag last warned about
        self.depth_moved = True  # since the engine last summed its vhosts' depths
        # warning episodes: the count a queue had before a restart (`records.warning_episodes`)
        # and the least number an episode starting now comes after (`fill_rate.numbered`;
        # the other replicas' episodes with shared state, `cluster.sync`)
        self.restored: Callable[[QueueKey], int] = lambda key: 0
        self.episode_floor: Callable[[QueueKey], int] = lambda key: 0

    def episodes(self, key: QueueKey) -> Episodes:
        """A new entry's warning episodes: the count kept across a restart."""
        count = self.restored(key)
        return Episodes(count=count) if count else NO_EPISODES

    def polled(self, entry: QueueEntry, info: QueueInfo, now: float, sent_at: float | None,
               statistics_at: float) -> None:
        """A poll's figures of the queue (`info`, its entry's now), read by requests sent
        at `sent_at`, describing `statistics_at`."""
        entry.bytes_per_message = bytes_per_message(info, entry.bytes_per_message)
        if sent_at is not None and info.messages is not None and info.unacked is not None:
            self.lag_meter.statistics(entry.key, sent_at, info.messages - info.unacked)
        if info.messages is not None and (entry.statistics_at is None
                                          or statistics_at > entry.statistics_at):
            entry.statistics_at = statistics_at
        self.take_newest(entry, now)
        if info.messages is not None and \
                not forecast.same(entry, statistics_at, info.messages, info.bytes):
            self._fit(entry, DepthFigure(statistics_at, info.messages, info.bytes))

    def redate(self, entry: QueueEntry, key: QueueKey, now: float, sent_at: float | None,
               statistics_at: float) -> bool:
        """A poll of the very `QueueInfo` the entry has (`merged_queues`): the same
        figures, of a later moment. Its thresholds, message size and depth stay what they
        are unless these statistics are newer than a live reading that was newer than the
        last ones; it is sampled now, its statistics are of `statistics_at`, and so is its
        bound unless a live reading stays newer (then its bound is the live one).
        True when its step and what it is told may be left out: a flowing queue, on its
        own machine, fresh before, whose depth stayed (every change of a depth, state or
        thresholds steps at once, and `step` is pure: on the same depth and thresholds it
        keeps a flowing queue flowing). A stopped queue, or one with a stopped producer
        class, always steps: its resume depends on the moments; so does a warned or paced
        one, whose pacing ends with time (`telling.step_pacing`). The forecast takes these
        figures of their new moment, for nothing while they change nothing of it
        (`QueueEntry.flat`)."""
        info = entry.info
        if info.messages is None:  # no figures: a live reading may still be the newest
            self.take_newest(entry, now)
            return False
        if sent_at is not None and info.unacked is not None and self.lag_meter.follows(key):
            self.lag_meter.statistics(key, sent_at, info.messages - info.unacked)
        before = entry.statistics_at
        at = entry.statistics_at = (statistics_at if before is None
                                    else max(before, statistics_at))
        if entry.flat and entry.fill is not None:  # equal figures, rate 0: nothing made
            entry.flat_until = max(entry.flat_until, at)  # a live figure may be later
        elif not forecast.same(entry, at, info.messages, info.bytes):
            self._fit(entry, DepthFigure(at, info.messages, info.bytes))
        live = entry.live
        live_newest = live is not None and (before is None or live.at > before)
        if live is not None and live_newest and live.at <= at:
            self.take_newest(entry, now)  # the statistics are the newest figure again
            return False
        if not live_newest:  # else the live reading stays the newest, with its bound
            entry.bound_messages, entry.bound_at = info.messages, at  # no object: see there
        entry.sampled_at = now
        self.told.revise(entry)
        if entry.stale:  # fresh again: what it is told may change (`update_told`)
            self.told.set_stale(entry, False)
            return False
        return not (entry.state.stopped or entry.classes_held or entry.warned
                    or entry.pacing.engaged) and info.broker_flow is None

    def live(self, entry: QueueEntry, sample: LiveSample, now: float) -> bool:
        """Take a live ready count, with the unacked count and message size of the last
        statistics; False when it is not to be used: gone or refused (the statistics
        count once newer), not trusted, or no newer than a figure already taken."""
        if sample.ready is None or not trusted(sample, entry.info) or (
                (entry.live is not None and sample.at <= entry.live.at)
                or (entry.statistics_at is not None and sample.at <= entry.statistics_at)):
            return False
        entry.live = live_reading(sample, entry.info)
        self.lag_meter.live(sample.key, sample.at, sample.ready)
        self.take_newest(entry, now)
        count = sample.ready + (entry.info.unacked or 0)
        if not forecast.same(entry, sample.at, count, None):
            self._fit(entry, DepthFigure(sample.at, count))
        return True

    def _fit(self, entry: QueueEntry, figure: DepthFigure) -> None:
        """Feed the queue's forecast one dated figure (`forecast.take`). Every caller moves
        the entry's revision with the figure (`take_newest`, `redate`): readers see it."""
        self._noted(entry, forecast.take(entry, figure))

    def rejudge(self, entry: QueueEntry) -> None:
        """Judge the queue's warning again on new thresholds or warning settings, at the
        moment of its newest figure (none yet: nothing to judge). Its one caller moved the
        revision with the thresholds (`FlowEngine._re_resolve`)."""
        figures = entry.estimator.figures
        if figures:
            at = max(figures[-1].at, entry.flat_until)
            self._noted(entry, forecast.judge(entry, at))

    def _noted(self, entry: QueueEntry, event: WarningEvent | None) -> None:
        """An episode's start or end, for the next commit (`Journal`)."""
        if event is None:
            return
        entry.episodes, event = numbered(entry.episodes, event, self.episode_floor(entry.key))
        fill = entry.fill
        note = forecast.WarningNote(entry.key, event, entry.depth, entry.seconds_to_stop,
                                    None if fill is None else fill.messages)
        pending = self.told.journal.pending
        pending.warnings.append(note)
        pending.lines.append(warning_line(
            entry.vhost, entry.name, started=event.kind is WarningKind.STARTED,
            episode=event.episode, depth=note.depth, seconds_to_stop=note.seconds_to_stop,
            fill_rate=note.fill_rate, lasted=event.at - event.started_at))

    def take_newest(self, entry: QueueEntry, now: float) -> None:
        """Show the newest of the queue's figures (`live_depth.newest_depth`) and keep its
        upper bound; no figure at all keeps the depth there is."""
        merged: Merged | None = newest_depth(entry.info, entry.statistics_at, entry.live,
                                             entry.bytes_per_message)
        if merged is None:
            return
        if merged.depth.bytes is None and entry.depth is not None and \
                not lacks_bytes(entry.info):
            # the broker can report bytes a round later (and Prometheus polls carry them
            # only now and then): show the last ones meanwhile
            merged = with_last_bytes(merged, entry.depth, entry.origin)
        depth = merged.depth
        if depth == entry.depth:
            # the entry keeps its object: an equal new one per queue and poll lived on in
            # the entries, 10,000 young objects for every collection to walk (docs/
            # benchmarks.md, "Soak"), and the hot-set scan compares by identity
            depth = entry.depth
        else:
            self.depth_moved = True
        entry.depth, entry.origin, entry.sampled_at = depth, merged.origin, now
        entry.bound = newest_bound(entry.info, entry.statistics_at, entry.live)
        self.told.revise(entry)
        self.told.set_stale(entry, False)

    def measure_lag(self) -> None:
        """Use the larger of --broker-stats-lag and the lag measured; warn when the option
        is below the measurement (again when the measurement grows by half)."""
        measured = self.lag_meter.measured()
        self.statistics_lag = max(self.configured_lag, measured or 0.0)
        if measured is None or measured <= self.configured_lag:
            return
        if self._lag_warned is None or measured > 1.5 * self._lag_warned:
            self._lag_warned = measured
            log.warning("the broker's statistics lag by %.1f s, more than --broker-stats-lag "
                        "%.1f s: using %.1f s (set --broker-stats-lag to at least that)",
                        measured, self.configured_lag, measured)
