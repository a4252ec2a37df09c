"""The flow engine: every queue's state in memory, fed by polls and by settings changes.

The engine is the thin stateful shell around the pure core (`thresholds.resolve`,
`flowstate.step`, `live_depth.merged_depth`). Depth comes from statistics polls and from
live samples of the hot queues, whichever is newer. It owns the in-memory table that
`GET /flow` answers from, persists what must survive a restart before anyone can observe
it, and tells listeners (long-poll waiters, webhooks, history) about every change of what
producers are told.

Readers (the HTTP layer, metrics, history) use the read-side methods (`entry`, `keys`,
`entries`, `stored_settings`, ...) and never the engine's dicts. Each entry carries a
`revision` that moves on every change of what its answer shows, so a reader may cache
what it built from an entry for as long as the revision stands.

Everything here runs on the event-loop thread; the only blocking work is the SQLite
commit of a cycle's changes, which is one small transaction.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, replace

from sidecar.flow.broker_state import follow
from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.live_depth import (
    DepthOrigin,
    LiveReading,
    bytes_per_message,
    live_depth,
    merged_depth,
)
from sidecar.flow.persistence import FlowStore, StoredState, TransactionLost
from sidecar.flow.queue_entry import QueueEntry, lacks_bytes, limits_of, resolution_inputs
from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.state_machine import Depth, EventKind, FlowEvent, FlowState, step
from sidecar.flow.stop_reasons import (
    OnStale,
    broker_wide_part,
    combine,
    describe_change,
)
from sidecar.flow.thresholds import (
    DefaultPolicy,
    Resolution,
    SourceProblem,
    resolve,
    unwatched_size,
    validate_settings,
)
from sidecar.flow.vhost_quota import vhost_depths
from sidecar.model import Change, LiveSample, QueueInfo, QueueKey
from sidecar.records.log_lines import printable, transition_line

log = logging.getLogger("flow_sidecar.flow")
DEFAULTS_KEY = "defaults"


class StoreUnavailable(RuntimeError):
    """A write could not be committed; nothing of it was kept, in memory or on disk."""


class SettingsRejected(ValueError):
    """Settings that Qpid's rules refuse; nothing was stored."""

    def __init__(self, problems: list[SourceProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class FlowEngine:
    """Holds and advances the flow state of every queue."""

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
        # how old the broker's statistics are when read: a live sample taken since then
        # outranks them (see sidecar.flow.live_depth)
        self.statistics_lag = statistics_lag
        # True while live samples can be had (the live sampler says so): statistics that
        # would flip a state then wait for the next live sample of the queue
        self.live_reachable = False
        self.startup_defaults = startup_defaults
        stored = store.get_value(DEFAULTS_KEY)
        self.defaults = DefaultPolicy(**stored) if isinstance(stored, dict) else startup_defaults
        self._defaults_stored = isinstance(stored, dict)  # see defaults_from_api
        self.stale_after = stale_after
        self.on_stale: OnStale = on_stale
        self._settings: dict[QueueKey, dict[str, int]] = store.load_settings()
        self._stored_states: dict[QueueKey, StoredState] = store.load_states()
        self._queues: dict[QueueKey, QueueEntry] = {}
        self.broker_wide = BrokerWide(store)  # vhost quotas and defaults, broker alarms
        # told about every change after it is committed (streams, history)
        self.listeners: list[Callable[[Change], None]] = []
        # write to the store inside the change's own transaction (the webhook outbox), so
        # a transition and its outgoing events are committed together or not at all
        self.store_listeners: list[Callable[[Change], None]] = []
        # called with a queue's key after any change of its answer's version (thresholds,
        # sources, staleness, state): what long-poll waiters wait for
        self.version_watchers: list[Callable[[QueueKey], None]] = []
        self.version_clock: Callable[[], float] | None = None  # see _next_version
        self.polled_once = False
        self.last_poll_at: float | None = None
        self.last_poll_error: str | None = None
        self.poll_failures = 0
        self._dirty: dict[QueueKey, StoredState] = {}
        self._pending: list[Change] = []
        self._bumped: set[QueueKey] = set()
        self._log_lines: list[str] = []  # transitions, logged once committed
        self._revisions = itertools.count(1)  # shared by all entries: never reused

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

    def stored_settings(self, key: QueueKey) -> dict[str, int] | None:
        """The queue's settings stored through the API (a copy), or None."""
        stored = self._settings.get(key)
        return None if stored is None else dict(stored)

    def settings_keys(self) -> list[QueueKey]:
        """Every queue with stored settings, whether the broker reports it or not."""
        return list(self._settings)

    def defaults_from_api(self) -> bool:
        """Whether the defaults in effect were stored through the API (they then win over
        the start-up options, restarts included) rather than being those options."""
        return self._defaults_stored

    def stored_count(self, key: QueueKey) -> int:
        """flowStoppedCount of a queue the broker does not report (history survives)."""
        stored = self._stored_states.get(key)
        return stored.stopped_count if stored else 0

    # -- poll results ------------------------------------------------------------------
    def apply_poll(self, infos: Iterable[QueueInfo], now: float) -> list[Change]:
        """Advance every queue by one broker sample. A queue missing from one poll may
        have fallen between two pages of the broker's listing (a queue before it deleted
        meanwhile); one missing from two polls in a row is gone."""
        seen: set[QueueKey] = set()
        for info in infos:
            key = (info.vhost, info.name)
            seen.add(key)
            entry = self._queues.get(key)
            if entry is not None:
                entry.missed_polls = 0
            if entry is None:
                entry = self._new_entry(info)
                entry.stale = info.messages is None  # seen by nobody yet: not a flip
            elif resolution_inputs(info) != resolution_inputs(entry.info):
                entry.info = info
                self._re_resolve(entry)
            else:
                entry.info = info
            if info.bytes is None and info.messages is not None and entry.depth is not None \
                    and not lacks_bytes(info):  # the broker can report bytes a round later
                info = replace(info, bytes=entry.depth.bytes)
            entry.bytes_per_message = bytes_per_message(info, entry.bytes_per_message)
            merged = merged_depth(info, entry.live, entry.bytes_per_message,
                                  now - self.statistics_lag, now, self._hold(entry))
            if merged is not None:
                self._take_depth(entry, merged.depth, merged.origin, merged.at)
        for key in [k for k in self._queues if k not in seen]:
            missing = self._queues[key]
            missing.missed_polls += 1
            if missing.missed_polls >= 2:
                self._remove(missing, now)
        # the vhost quotas step on the new totals before any queue is told anything, so
        # a queue hears of its own crossing and of its vhost's in one change
        self.broker_wide.observe(
            vhost_depths((e.vhost, e.depth) for e in self._queues.values()), now)
        for key, entry in self._queues.items():
            if key in seen:
                self._advance(entry, now, "")
            self._update_told(entry, now, "data fresh")
        self.polled_once = True
        self.last_poll_at = now
        self.last_poll_error = None
        self.poll_failures = 0
        self.refresh_staleness(now)
        return self._commit(now)

    def apply_live(self, samples: Iterable[LiveSample], now: float) -> list[Change]:
        """Advance queues on live ready counts (`sidecar.broker.LiveDepthSource`), with the
        unacked count and message size of their last statistics. A queue that cannot be
        read live (deleted: the polls decide that; or refused) goes by its statistics."""
        for sample in samples:
            entry = self._queues.get(sample.key)
            if entry is None:
                continue
            if sample.ready is None:  # gone or refused: its statistics alone count
                entry.live = None
                continue
            entry.live = LiveReading(sample.ready, sample.at)
            self._take_depth(entry, *live_depth(sample.ready, entry.info,
                                                entry.bytes_per_message), sample.at)
            self._advance(entry, now, "")
            self._update_told(entry, now, "data fresh")
        return self._commit(now)

    def poll_failed(self, error: str, now: float) -> list[Change]:
        """A poll that failed changes no flow state; it only ages the data."""
        if self.last_poll_error is None:  # one line per outage; the poller logs the end
            log.warning("broker poll failed: %s; keeping last known flow states", error)
        self.last_poll_error = error
        self.poll_failures += 1
        self.refresh_staleness(now)
        return self._commit(now)

    def refresh_staleness(self, now: float) -> list[Change]:
        """Mark queues whose last sample is older than stale_after; apply --on-stale."""
        for entry in self._queues.values():
            stale = entry.sampled_at is None or now - entry.sampled_at > self.stale_after
            if stale != entry.stale:
                self._set_stale(entry, stale)
                self._update_told(entry, now, "data stale" if stale else "data fresh again")
        return self._commit(now)

    def _set_stale(self, entry: QueueEntry, stale: bool) -> None:
        """A flip of `stale` is news for producers whatever --on-stale makes of it (it
        says how far to trust the answer): a new version, which wakes long-pollers."""
        if stale != entry.stale:
            entry.stale = stale
            self._bump(entry)

    # -- settings: each write is one transaction, all or nothing ------------------------
    def put_settings(self, key: QueueKey, values: Mapping[str, int], now: float) -> None:
        """Validate, store and apply a queue's API settings (replacing earlier ones). The
        settings row, the states it changes and their webhook events commit together;
        StoreUnavailable when they could not, and then nothing changed."""
        entry = self._queues.get(key)
        problems = validate_settings(values, entry.limits if entry else None, self.defaults)
        if problems:
            raise SettingsRejected(problems)
        with self._all_or_nothing([key]):
            self._settings[key] = dict(values)
            self._apply_config(key, now, "settings changed")
            self._commit(now, lambda: self.store.put_settings(key, values, now))

    def delete_settings(self, key: QueueKey, now: float) -> bool:
        """Forget a queue's API settings; its arguments and defaults apply again. False
        when none were stored."""
        if key not in self._settings:
            return False
        with self._all_or_nothing([key]):
            del self._settings[key]
            self._apply_config(key, now, "settings removed")
            self._commit(now, lambda: self.store.delete_settings(key))
        return True

    def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        """Change the broker-wide default percentages/limit at run time (None: back to the
        start-up options). Persisted, so a restart keeps what the operator chose."""
        chosen = policy or self.startup_defaults
        if chosen.problems():
            raise ValueError("; ".join(chosen.problems()))
        with self._all_or_nothing(list(self._queues)):
            self.defaults = chosen
            for key in list(self._queues):
                self._apply_config(key, now, "defaults changed")
            self._commit(now, lambda: self.store.set_value(
                DEFAULTS_KEY, None if policy is None else asdict(policy)))
        self._defaults_stored = policy is not None  # committed: a failure raised above

    def reconfigure_vhost(self, vhost: str, now: float, change: Callable[[], object],
                          write: Callable[[], object]) -> None:
        """Apply `change` to the broker-wide state (a vhost's quota or default thresholds,
        see `vhost_settings`), re-resolve and re-tell the vhost's queues, and store it with
        `write`: one transaction, all or nothing."""
        keys = [k for k in self._queues if k[0] == vhost]
        with self._all_or_nothing(keys):
            change()
            for key in keys:
                self._apply_config(key, now, "vhost settings changed")
                self._update_told(self._queues[key], now, "vhost settings changed")
            self._commit(now, write)

    # -- shared state: what other replicas stored (sidecar.cluster) ---------------------
    def adopt_shared(self, settings: Mapping[QueueKey, Mapping[str, int] | None],
                     floors: Mapping[QueueKey, int], now: float) -> None:
        """Take in settings other replicas stored (None: deleted), re-evaluated as a local
        write is, and the least flowStoppedCount each queue may show; the settings are
        cached in the store in the same transaction. StoreUnavailable when that failed,
        and then nothing changed."""
        if not settings and not floors:
            return
        with self._all_or_nothing([*settings, *floors]):
            for key, floor in floors.items():
                self._raise_count(key, floor)
            for key, values in settings.items():
                if values is None:
                    self._settings.pop(key, None)
                else:
                    self._settings[key] = dict(values)
                self._apply_config(key, now, "settings changed through another replica")
            self._commit(now, lambda: self._cache_settings(settings, now))

    def _cache_settings(self, settings: Mapping[QueueKey, Mapping[str, int] | None],
                        now: float) -> None:
        for key, values in settings.items():
            if values is None:
                self.store.delete_settings(key)
            else:
                self.store.put_settings(key, values, now)

    def _raise_count(self, key: QueueKey, floor: int) -> None:
        entry = self._queues.get(key)
        if entry is not None and entry.state.stopped_count < floor:
            entry.state = FlowState(entry.state.stopped, floor)
            entry.revision = next(self._revisions)
            self._mark_dirty(entry)
        stored = self._stored_states.get(key, StoredState(False, 0, 0))
        if entry is None and stored.stopped_count < floor:
            self._dirty[key] = self._stored_states[key] = StoredState(
                stored.stopped, floor, stored.version)

    @contextmanager
    def _all_or_nothing(self, keys: list[QueueKey]) -> Iterator[None]:
        """Undo every in-memory effect of a write whose commit failed: settings, defaults,
        the touched entries and whatever was waiting for the next commit."""
        saved_settings = {k: self._settings.get(k) for k in keys}
        saved_entries = {k: copy.copy(e) for k in keys if (e := self._queues.get(k))}
        saved = (self.defaults, list(self._pending), dict(self._dirty), set(self._bumped),
                 list(self._log_lines), dict(self._stored_states))
        saved_wide = self.broker_wide.snapshot()
        try:
            yield
        except Exception as exc:
            for key, stored in saved_settings.items():
                if stored is None:
                    self._settings.pop(key, None)
                else:
                    self._settings[key] = stored
            for key, entry in saved_entries.items():
                if key in self._queues:
                    self._queues[key] = entry
            (self.defaults, self._pending, self._dirty, self._bumped, self._log_lines,
             self._stored_states) = saved
            self.broker_wide.restore(saved_wide)
            log.error("a settings write could not be stored (%s: %s); nothing was changed",
                      type(exc).__name__, exc)
            raise StoreUnavailable(f"the settings store could not commit: {exc}") from exc

    # -- internals --------------------------------------------------------------------
    def _resolve(self, info: QueueInfo, limits: QueueLimits) -> Resolution:
        if info.broker_flow is not None:  # the broker's own thresholds, as it applies them
            return info.broker_flow.resolution
        resolution = resolve(self._settings.get((info.vhost, info.name)), info.arguments,
                             limits, self.defaults, self.broker_wide.queue_defaults(info.vhost))
        if lacks_bytes(info):
            return unwatched_size(resolution, "the broker reports no byte count "
                                  f"(message_bytes) for this {info.queue_type} queue")
        return resolution

    def _new_entry(self, info: QueueInfo) -> QueueEntry:
        key = (info.vhost, info.name)
        stored = self._stored_states.get(key, StoredState(False, 0, 0))
        limits = limits_of(info)
        entry = QueueEntry(
            vhost=info.vhost, name=info.name, info=info, limits=limits,
            resolution=self._resolve(info, limits),
            state=FlowState(stored.stopped, stored.stopped_count),
            version=stored.version, told_stopped=stored.stopped,
            revision=next(self._revisions),
        )
        self._log_problems(entry, None)
        self._queues[key] = entry
        return entry

    def _re_resolve(self, entry: QueueEntry) -> bool:
        """Recompute limits and thresholds; True if what the queue watches changed."""
        before = entry.resolution
        entry.limits = limits_of(entry.info)
        entry.resolution = self._resolve(entry.info, entry.limits)
        entry.revision = next(self._revisions)
        self._log_problems(entry, before)
        changed = (before.thresholds, before.count_source, before.size_source) != (
            entry.resolution.thresholds, entry.resolution.count_source,
            entry.resolution.size_source)
        if changed:
            self._bump(entry)
        return changed

    def _apply_config(self, key: QueueKey, now: float, reason: str) -> None:
        entry = self._queues.get(key)
        if entry is not None and self._re_resolve(entry):
            self._advance(entry, now, reason)

    def _log_problems(self, entry: QueueEntry, before: Resolution | None) -> None:
        old = set(before.errors + before.warnings) if before else set()
        for problem in entry.resolution.errors + entry.resolution.warnings:
            if problem not in old:
                log.warning("[vh(%s)/qu(%s)] flow configuration ignored: %s",
                            printable(entry.vhost), printable(entry.name), printable(problem))

    def _hold(self, entry: QueueEntry) -> Callable[[Depth], bool] | None:
        """For a queue read live, while live samples can be had: statistics that would flip
        its state wait for its next live sample."""
        if not self.live_reachable or entry.live is None:
            return None

        def flips(depth: Depth) -> bool:
            moved, _ = step(entry.state, depth, entry.resolution.thresholds)
            return moved.stopped != entry.state.stopped

        return flips

    def _take_depth(self, entry: QueueEntry, depth: Depth, origin: DepthOrigin,
                    at: float) -> None:
        entry.depth, entry.origin, entry.sampled_at = depth, origin, at
        entry.revision = next(self._revisions)
        self._set_stale(entry, False)

    def _advance(self, entry: QueueEntry, now: float, reason: str) -> None:
        """Step the machine against the last depth sample (no sample: no step)."""
        if entry.depth is None:
            return
        reported = entry.info.broker_flow
        if reported is not None:  # the broker enforces flow control: report its state
            state, events = follow(entry.state, entry.depth, entry.resolution.thresholds,
                                   reported)
        else:
            state, events = step(entry.state, entry.depth, entry.resolution.thresholds)
        if state == entry.state:
            return
        entry.state = state
        for event in events:
            entry.last_transition_at = now
            if not entry.resolution.thresholds.enabled:
                reason = reason or "flow control disabled"
            self._log_lines.append(transition_line(entry.vhost, entry.name, event, reason))
            self._update_told(entry, now, reason, event)
        self._mark_dirty(entry)

    def _update_told(
        self, entry: QueueEntry, now: float, reason: str, event: FlowEvent | None = None
    ) -> None:
        """Re-decide what the queue's producers are told (`stop_reasons.combine`). A change
        of it, a transition, or a broker-wide reason starting or ending is a Change (for
        streams and webhooks); any other change of why only moves the version."""
        reasons = combine(entry.state.stopped, entry.stale, self.on_stale,
                          self.broker_wide.reasons(entry.vhost))
        told = bool(reasons)
        if reasons == entry.stop_reasons and told == entry.told_stopped and event is None:
            return
        wide = (broker_wide_part(entry.stop_reasons), broker_wide_part(reasons))
        entry.stop_reasons = reasons
        self._bump(entry)
        if told == entry.told_stopped and event is None and wide[0] == wide[1]:
            return
        entry.told_stopped = told
        if event is None and wide[0] != wide[1]:
            reason = describe_change(*wide)
        self._pending.append(Change(entry.vhost, entry.name, entry.version, told, event, reason,
                                    entry.state.stopped_count, tuple(r.by for r in reasons)))

    def _bump(self, entry: QueueEntry) -> None:
        entry.version = self._next_version(entry.version)
        entry.revision = next(self._revisions)
        self._bumped.add(entry.key)
        self._mark_dirty(entry)

    def _next_version(self, version: int) -> int:
        """+1, or with `version_clock` the clock in ms if that is more: then replicas give
        different answers different versions, and a long-poll moved to another replica
        cannot wait on a version number that replica gave another state."""
        if self.version_clock is None:
            return version + 1
        return max(version + 1, int(self.version_clock() * 1000))

    def _mark_dirty(self, entry: QueueEntry) -> None:
        stored = StoredState(entry.state.stopped, entry.state.stopped_count, entry.version)
        self._dirty[entry.key] = stored
        self._stored_states[entry.key] = stored

    def _remove(self, entry: QueueEntry, now: float) -> None:
        """A deleted queue loses its state but keeps its counter and version history."""
        del self._queues[entry.key]
        entry.version = self._next_version(entry.version)
        self._bumped.add(entry.key)
        if entry.state.stopped:
            entry.state = FlowState(False, entry.state.stopped_count)
            event = FlowEvent(EventKind.UNDERFULL, entry.depth or Depth(0, 0),
                              entry.resolution.thresholds, entry.state.stopped_count)
            self._log_lines.append(
                transition_line(entry.vhost, entry.name, event, "queue deleted"))
        if entry.told_stopped:
            self._pending.append(Change(entry.vhost, entry.name, entry.version, False, None,
                                        "queue deleted", entry.state.stopped_count))
        self._mark_dirty(entry)

    def _commit(self, now: float, write: Callable[[], object] | None = None) -> list[Change]:
        """Persist `write` (a settings write), the changed states and what store listeners
        write for the changes, in one transaction; then log the transitions and tell the
        other listeners and the version watchers.

        Nothing is observable before the commit (this all runs on the event-loop thread).
        A commit that fails keeps its changes for the next one, and nobody outside the
        store has heard of them yet, so a retry tells each listener once.
        """
        changes, self._pending = self._pending, []
        dirty, self._dirty = self._dirty, {}
        bumped, self._bumped = self._bumped, set()
        vhost_states, vhost_lines = self.broker_wide.take_pending()
        lines, self._log_lines = self._log_lines + vhost_lines, []
        if not changes and not dirty and not vhost_states and write is None:
            self._log_lines = lines + self._log_lines
            return changes
        try:
            with self.store.transaction():
                if write is not None:
                    write()
                self.store.save_states(dirty, now)
                self.store.save_vhost_states(vhost_states, now)
                self._tell(self.store_listeners, changes)
        except Exception:
            # Nothing was committed (the disk is full?): keep it all for the next commit,
            # so no transition is lost to webhooks, streams or the counters.
            self._pending = changes + self._pending
            self._dirty = {**dirty, **self._dirty}
            self._bumped |= bumped
            self._log_lines = lines + self._log_lines
            self.broker_wide.put_back(vhost_states)
            raise
        for line in lines:
            log.info(line)
        self._tell(self.listeners, changes)
        for key in bumped:
            for watcher in self.version_watchers:
                watcher(key)
        return changes

    @staticmethod
    def _tell(listeners: list[Callable[[Change], None]], changes: list[Change]) -> None:
        for change in changes:
            for listener in listeners:
                try:
                    listener(change)
                except TransactionLost:
                    raise  # the whole commit is gone, not just this listener's part
                except Exception:  # a broken listener must not stop flow control
                    log.exception("listener failed on %s", change)
