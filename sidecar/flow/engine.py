"""The flow engine: every queue's state in memory, fed by polls and by settings changes.

The engine is the thin stateful shell around the pure core (`thresholds.resolve`,
`flowstate.step`, `live_depth`). Depth comes from statistics polls and from live samples,
whichever describes the later moment; only an upper bound of it may release producers.
It owns the in-memory table that `GET /flow` answers from, persists what must survive a
restart before anyone can observe it (`journal`), and tells listeners (long-poll waiters,
webhooks, history) about every change of what producers are told. It is composed of
collaborators, each reaching the others only through what it is given: `writes`
(`engine_writes`: the settings and defaults, and their writes, through `EngineSide`),
`figures` (`figure_intake`: a sample's figures into an entry) and `told` (`telling`: what
a queue is told, its version and revision).

Readers (the HTTP layer, metrics, history) use the read-side methods (`entry`, `keys`,
...), never the engine's dicts, and may cache what they build while an entry's `revision` stands.

Everything here runs on the event-loop thread; the only blocking work is the SQLite
commit of a cycle's changes, which is one small transaction.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from sidecar.flow import class_states
from sidecar.flow.broker_state import follow
from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.engine_writes import SettingsRejected, SettingsWrites, StoreUnavailable
from sidecar.flow.figure_intake import FigureIntake
from sidecar.flow.journal import Journal
from sidecar.flow.live_depth import newest_moment
from sidecar.flow.persistence import FlowStore, StoredState
from sidecar.flow.queue_entry import QueueEntry, lacks_bytes, limits_of, resolution_inputs
from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.slices import SLICE, Steps, drain
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.stop_reasons import OnStale
from sidecar.flow.telling import Telling
from sidecar.flow.thresholds import DefaultPolicy, Resolution, resolve, unwatched_size
from sidecar.flow.vhost_quota import vhost_depths
from sidecar.model import Change, LiveSample, QueueInfo, QueueKey
from sidecar.records.log_lines import printable

log = logging.getLogger("flow_sidecar.flow")
__all__ = ["FlowEngine", "SettingsRejected", "StoreUnavailable"]


class FlowEngine:
    """Holds and advances the flow state of every queue; see the module docstring."""

    def __init__(
        self,
        store: FlowStore,
        startup_defaults: DefaultPolicy,
        *,
        stale_after: float,
        on_stale: OnStale = "hold",
        statistics_lag: float = 0.0,
    ) -> None:
        self.store = store
        self.stale_after = stale_after
        self.writes = SettingsWrites(self, startup_defaults)
        self.journal = Journal(store.load_states())
        self._queues: dict[QueueKey, QueueEntry] = {}
        self.broker_wide = BrokerWide(store)  # vhost quotas and defaults, broker alarms
        self.broker_wide.on_unread = (on_stale, stale_after)
        self.told = Telling(self.journal, self.broker_wide, on_stale)  # versions, revisions
        self.figures = FigureIntake(self.told, statistics_lag)  # depths, bounds, moments
        self.lag_meter = self.figures.lag_meter
        # whom to tell about changes once committed (see sidecar.flow.journal)
        self.listeners = self.journal.listeners
        self.store_listeners = self.journal.store_listeners
        self.version_watchers = self.journal.version_watchers
        self.polled_once = False
        self.last_poll_at: float | None = None
        self.last_poll_error: str | None = None
        self.poll_failures = 0
        # each vhost's total depth, summed again only after a depth moved or a queue came
        # or went: a poll of 10,000 unchanged queues then walks only what changed
        self._totals: dict[str, Depth] = {}
        self._reasons_walked = -1  # `BrokerWide.generation` at the last walk of every queue
        self._per_vhost: Counter[str] | None = None  # queues per vhost; None: count again

    # -- the read side ----------------------------------------------------------------
    def entry(self, key: QueueKey) -> QueueEntry | None:
        """The queue as the broker last reported it, or None."""
        return self._queues.get(key)

    def keys(self) -> list[QueueKey]:
        """Every queue the broker reports."""
        return list(self._queues)

    def entries(self) -> list[QueueEntry]:
        """Every queue the broker reports, as entries."""
        return list(self._queues.values())

    def queue_count(self) -> int:
        """How many queues the broker reports."""
        return len(self._queues)

    def vhost_queue_counts(self) -> Counter[str]:
        """How many queues the broker reports per vhost (a copy): counted again only after a
        queue came or went, not per dashboard refresh (80 ms at 10,000 queues, on the loop)."""
        if self._per_vhost is None:
            self._per_vhost = Counter(entry.vhost for entry in self._queues.values())
        return Counter(self._per_vhost)

    def stored_settings(self, key: QueueKey) -> dict[str, float] | None:
        """The queue's settings stored through the API (a copy), or None."""
        stored = self.writes.settings.get(key)
        return None if stored is None else dict(stored)

    def stored_classes(self, key: QueueKey) -> dict[str, float] | None:
        """The queue's own producerClasses stored through the API (a copy), or None."""
        return None if (stored := self.writes.classes.get(key)) is None else dict(stored)

    def settings_keys(self) -> list[QueueKey]:
        """Every queue with stored settings, whether the broker reports it or not."""
        return list(self.writes.settings)

    @property
    def defaults(self) -> DefaultPolicy:
        """The default thresholds in effect (`set_defaults` changes them)."""
        return self.writes.defaults

    @property
    def startup_defaults(self) -> DefaultPolicy:
        return self.writes.startup_defaults

    @property
    def statistics_lag(self) -> float:
        """Seconds the broker's statistics are taken to lag (`FigureIntake`)."""
        return self.figures.statistics_lag

    @property
    def configured_lag(self) -> float:
        return self.figures.configured_lag

    @property
    def on_stale(self) -> OnStale:
        """--on-stale: what producers of a queue whose figures are stale are told."""
        return self.told.on_stale

    @on_stale.setter
    def on_stale(self, on_stale: OnStale) -> None:
        self.told.on_stale = on_stale

    @property
    def version_clock(self) -> Callable[[], float] | None:
        """Versions from this clock when ahead (`Telling.next_version`: replicas)."""
        return self.told.version_clock

    @version_clock.setter
    def version_clock(self, clock: Callable[[], float] | None) -> None:
        self.told.version_clock = clock

    def defaults_from_api(self) -> bool:
        """Whether the defaults in effect were stored through the API (they then win over
        the start-up options, restarts included) rather than being those options."""
        return self.writes.defaults_stored

    # -- writes: each one transaction, all or nothing (`engine_writes`) -----------------
    def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float,
                     classes: Mapping[str, float] | None = None) -> None:
        self.writes.put_settings(key, values, now, classes)

    def delete_settings(self, key: QueueKey, now: float) -> bool:
        return self.writes.delete_settings(key, now)

    def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        self.writes.set_defaults(policy, now)

    def reconfigure_vhost(self, vhost: str, now: float, change: Callable[[], object],
                          write: Callable[[], object]) -> None:
        self.writes.reconfigure_vhost(vhost, now, change, write)

    def adopt_shared(self, settings: Mapping[QueueKey, Mapping[str, float] | None],
                     floors: Mapping[QueueKey, int], now: float,
                     classes: Mapping[QueueKey, Mapping[str, float] | None] | None = None,
                     ) -> None:
        self.writes.adopt_shared(settings, floors, now, classes)

    # -- what the writes need of the engine (`engine_writes.EngineSide`) ---------------
    def reconfigure(self, key: QueueKey, now: float, reason: str, *,
                    retell: bool = False) -> None:
        """Resolve the queue's thresholds again on new settings, step it when they moved,
        and with `retell` re-decide what it is told (its vhost's reasons changed)."""
        entry = self._queues.get(key)
        if entry is None:
            return
        if self._re_resolve(entry):
            self._advance(entry, now, reason)
        if retell:
            self.told.update_told(entry, now, reason)

    def raise_count(self, key: QueueKey, floor: int) -> None:
        """flowStoppedCount at least `floor` (what another replica counted), in memory
        and in what is stored of a queue the broker does not report."""
        entry = self._queues.get(key)
        if entry is not None and entry.state.stopped_count < floor:
            entry.state = FlowState(entry.state.stopped, floor)
            self.told.revise(entry)
            self.told.mark_dirty(entry)
        stored = self.journal.stored.get(key, StoredState(False, 0, 0))
        if entry is None and stored.stopped_count < floor:
            self.journal.record(key, replace(stored, stopped_count=floor))

    def saved(self, keys: list[QueueKey]) -> Callable[[], None]:
        """What puts back the entries of `keys`, what waits for the next commit and the
        broker-wide state as they are now: the undo of a write that could not commit."""
        entries = {k: copy.copy(e) for k in keys if (e := self._queues.get(k))}
        journal, wide = self.journal.snapshot(), self.broker_wide.snapshot()

        def restore() -> None:
            for key, entry in entries.items():
                if key in self._queues:
                    self._queues[key] = entry
            self.journal.restore(journal)
            self.broker_wide.restore(wide)
        return restore

    def commit(self, now: float, write: Callable[[], object] | None = None) -> list[Change]:
        """Commit what changed, with `write` (a settings write): `Journal.commit`."""
        return self.journal.commit(self.store, self.broker_wide, now, write)

    def stored_count(self, key: QueueKey) -> int:
        """flowStoppedCount of a queue the broker does not report (history survives)."""
        stored = self.journal.stored.get(key)
        return stored.stopped_count if stored else 0

    # -- poll results ------------------------------------------------------------------
    def apply_poll(self, infos: Iterable[QueueInfo], now: float,
                   sent_at: float | None = None) -> list[Change]:
        """Advance every queue by one broker sample, read by requests sent from `sent_at`
        (default `now`), in one go (`apply_poll_in_slices` says how)."""
        return drain(self.apply_poll_in_slices(infos, now, sent_at))

    def apply_poll_in_slices(self, infos: Iterable[QueueInfo], now: float,
                             sent_at: float | None = None) -> Steps[list[Change]]:
        """`apply_poll`, yielding every SLICE queues so that the caller may let the event
        loop answer `/flow` in between (10,000 queues take 0.1-0.3 s). Each queue is
        whole at every yield; the poll's vhost totals and removals wait for its last
        queue. A queue missing from one poll may have fallen between two pages of the
        broker's listing (a queue before it deleted meanwhile); one missing from two polls
        in a row is gone."""
        statistics_at = (now if sent_at is None else sent_at) - self.figures.statistics_lag
        seen: set[QueueKey] = set()  # the queues of the poll
        moved: list[QueueKey] = []  # of them, those to step and re-tell (`_ingest`)
        for count, info in enumerate(infos, 1):
            entry = self._ingest(info, now, sent_at, statistics_at, seen)
            if entry is not None:
                moved.append(entry.key)
            if count % SLICE == 0:
                yield
        yield  # the two set differences below (0.4-1 ms each, in C) begin a slice's step
        unlisted = list(self._queues.keys() - seen)  # in C, not a walk: nearly always none
        for key in unlisted:
            missing = self._queues[key]
            missing.missed_polls += 1
            if missing.missed_polls >= 2:
                self._remove(missing, now)
        self.lag_meter.forget(self._queues.keys())  # no copy of every key per poll
        self.figures.measure_lag()
        yield
        # the vhost quotas step on the new totals before any queue is told anything, so
        # a queue hears of its own crossing and of its vhost's in one change
        if self.figures.depth_moved:
            self._totals = vhost_depths((e.vhost, e.depth) for e in self._queues.values())
            self.figures.depth_moved = False
        self.broker_wide.observe(self._totals, now)
        reasons = self.broker_wide.generation
        # a queue left out is one whose figures the poll only dated again, flowing, fresh
        # before and after, with the broker-wide reasons of the walk before: nothing of
        # what it is told can have changed (`Telling.update_told` would find it as it is). By
        # key: a write that could not commit between two slices puts back copies
        walk: Iterable[QueueKey] = moved + unlisted
        if reasons != self._reasons_walked:
            walk, self._reasons_walked = list(self._queues), reasons
        stepped = set(moved)
        for count, key in enumerate(walk, 1):
            entry = self._queues.get(key)
            if entry is None:  # removed above
                continue
            if key in stepped:
                self._advance(entry, now, "")
            self.told.update_told(entry, now, "data fresh")
            self._refresh_stale(entry, now)
            if count % SLICE == 0:
                yield
        self.polled_once = True
        self.last_poll_at = now
        self.last_poll_error = None
        self.poll_failures = 0
        return self.commit(now)

    def _ingest(self, info: QueueInfo, now: float, sent_at: float | None,
                statistics_at: float, seen: set[QueueKey]) -> QueueEntry | None:
        """Take one queue's sample of a poll: its entry, figures and their moment, its key
        into `seen`; the entry when the machine is to step on them (None: `FigureIntake.redate`)."""
        entry = self._queues.get((info.vhost, info.name))
        if entry is not None:
            key = entry.key  # kept: `seen` lasts the whole poll, a new tuple a moment
            seen.add(key)
            entry.missed_polls = 0
            if info is entry.info:  # the adapter kept it: nothing it shows changed
                return (None if self.figures.redate(entry, key, now, sent_at, statistics_at)
                        else entry)
        else:
            key = (info.vhost, info.name)
            seen.add(key)
        if entry is None:
            entry = self._new_entry(info)
            entry.stale = info.messages is None  # seen by nobody yet: not a flip
            if entry.state.stopped or entry.classes_held:  # as a process before this one
                entry.resume_after = now  # left it: figures it saw may be newer than a poll's
        elif resolution_inputs(info) != resolution_inputs(entry.info):
            entry.info = info
            self._re_resolve(entry)
        else:
            entry.info = info
        self.figures.polled(entry, info, now, sent_at, statistics_at)
        return entry

    def apply_live(self, samples: Iterable[LiveSample], now: float) -> list[Change]:
        """Advance queues on live ready counts (`sidecar.broker.LiveDepthSource`), with the
        unacked count and message size of their last statistics. A queue that cannot be
        read live (deleted: the polls decide that; or refused) goes by its statistics."""
        for sample in samples:
            entry = self._queues.get(sample.key)
            if entry is None or not self.figures.live(entry, sample, now):
                continue
            self._advance(entry, now, "")
            self.told.update_told(entry, now, "data fresh")
        return self.commit(now)

    def poll_failed(self, error: str, now: float) -> list[Change]:
        """A poll that failed changes no flow state; it only ages the data."""
        if self.last_poll_error is None:  # one line per outage; the poller logs the end
            log.warning("broker poll failed: %s; keeping last known flow states", error)
        self.last_poll_error = error
        self.poll_failures += 1
        self.refresh_staleness(now)
        return self.commit(now)

    def refresh_staleness(self, now: float) -> list[Change]:
        """Mark queues whose last sample is older than stale_after; apply --on-stale."""
        for entry in self._queues.values():
            self._refresh_stale(entry, now)
        return self.commit(now)

    def _refresh_stale(self, entry: QueueEntry, now: float) -> None:
        stale = entry.sampled_at is None or now - entry.sampled_at > self.stale_after
        if stale != entry.stale:
            self.told.set_stale(entry, stale)
            self.told.update_told(entry, now, "data stale" if stale else "data fresh again")

    # -- internals --------------------------------------------------------------------
    def _resolve(self, info: QueueInfo, limits: QueueLimits) -> Resolution:
        if info.broker_flow is not None:  # the broker's own thresholds, as it applies them
            return info.broker_flow.resolution
        resolution = resolve(self.writes.settings.get((info.vhost, info.name)), info.arguments,
                             limits, self.defaults, self.broker_wide.queue_defaults(info.vhost))
        if lacks_bytes(info):
            return unwatched_size(resolution, info.bytes_unreported or "the broker reports "
                                  f"no byte count (message_bytes) for this {info.queue_type} "
                                  "queue")
        return resolution

    def _new_entry(self, info: QueueInfo) -> QueueEntry:
        key = (info.vhost, info.name)
        stored = self.journal.stored.get(key, StoredState(False, 0, 0))
        limits = limits_of(info)
        entry = QueueEntry(
            vhost=info.vhost, name=info.name, info=info, limits=limits,
            resolution=self._resolve(info, limits), episodes=self.figures.episodes(key),
            state=FlowState(stored.stopped, stored.stopped_count),
            version=stored.version, told_stopped=stored.stopped,
            warning_policy=self.writes.warning_policy(key, self.broker_wide))
        class_states.restore(entry, self.writes.classes_of(key), stored)
        self.told.revise(entry)
        self._log_problems(entry, None)
        self._queues[key] = entry
        self.figures.depth_moved = True  # its vhost is listed, if only with nothing
        self._per_vhost = None
        return entry

    def _re_resolve(self, entry: QueueEntry) -> bool:
        """Recompute limits and thresholds; True if what the queue watches changed."""
        before = entry.resolution
        entry.limits = limits_of(entry.info)
        entry.resolution = self._resolve(entry.info, entry.limits)
        self.told.revise(entry)
        self._log_problems(entry, before)
        entry.warning_policy = self.writes.warning_policy(entry.key, self.broker_wide)
        self.figures.rejudge(entry)
        moved = class_states.adopt(entry, self.writes.classes_of(entry.key))
        changed = moved or (before.thresholds, before.count_source, before.size_source) != (
            entry.resolution.thresholds, entry.resolution.count_source,
            entry.resolution.size_source)
        if changed:
            self.told.bump(entry)
        return changed

    def _log_problems(self, entry: QueueEntry, before: Resolution | None) -> None:
        old = set(before.errors + before.warnings) if before else set()
        for problem in entry.resolution.errors + entry.resolution.warnings:
            if problem not in old:
                log.warning("[vh(%s)/qu(%s)] flow configuration ignored: %s",
                            printable(entry.vhost), printable(entry.name), printable(problem))

    def _advance(self, entry: QueueEntry, now: float, reason: str) -> None:
        """Step the queue's machine, then its producer classes' (`class_states`)."""
        self._advance_queue(entry, now, reason)
        class_states.step(entry, self.told)

    def _advance_queue(self, entry: QueueEntry, now: float, reason: str) -> None:
        """Step the machine: a flowing queue on its newest depth, which may stop it; a
        stopped one only on an upper bound of its depth (`live_depth.resume_depth`), which
        alone may release its producers. No sample: no step."""
        if entry.depth is None:
            return
        reported = entry.info.broker_flow
        thresholds = entry.resolution.thresholds
        if reported is not None:  # the broker enforces flow control: report its state
            state, events = follow(entry.state, entry.depth, thresholds, reported)
        elif entry.state.stopped and thresholds.enabled:
            bound = entry.resume_bound(entry.stopped_on)
            if bound is None:
                return
            state, events = step(entry.state, bound, thresholds)
        else:
            state, events = step(entry.state, entry.depth, thresholds)
        if state is entry.state or state == entry.state:  # `step` keeps it when unchanged
            return
        if state.stopped and not entry.state.stopped:
            entry.stopped_on = newest_moment(entry.statistics_at, entry.live)
        entry.state = state
        self.told.transitions(entry, events, now, reason)

    def _remove(self, entry: QueueEntry, now: float) -> None:
        """A deleted queue loses its state but keeps its counter and version history."""
        del self._queues[entry.key]
        self.figures.depth_moved, self._per_vhost = True, None
        self.told.removed(entry)
