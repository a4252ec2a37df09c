"""Keeps a replica in step with the state all replicas share in the broker's global
parameters (`shared_view`): one read per poll, just before the poll's queues are applied.

- Settings, defaults and webhook subscriptions: the shared state wins. What another replica
  changed is applied here within one poll (re-evaluated as a local write is, and cached in
  SQLite); what was deleted there is deleted here.
- `flowStoppedCount`: every replica counts the transitions it sees; each raises its counts
  to `counter_floor` of the shared record, and records its own transitions (and counts
  ahead of the record) there after the poll, off the event loop.
- Warning episodes: recorded the same way in a parameter of their own; an episode starting
  here is numbered after `episode_floor` of that record (`episode_floor`), so the Nth
  episode is the Nth on every replica and its webhooks are one event (`shared_outbox`).
- Membership: before each read, the replica's heartbeat is written, and the read's
  replicas and credit records go to `GrantOwnership` (who grants credit on which vhost,
  and what other replicas may still spend); then the `on_view` hooks get the view (the
  replicas' producer reports, `sidecar.cluster.reports_record`).
- Migration: the first time a data directory runs with shared state, its settings, defaults,
  subscriptions and counters that the shared state lacks are written there, in the first
  poll's read (a single-node sidecar becoming the first replica keeps everything). Until
  that is done, shared settings are not applied, so an empty shared state cannot wipe the
  local ones.

A read that fails changes nothing: the replica keeps serving what it has (its cache).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from sidecar.broker import BrokerError
from sidecar.broker.global_parameters import GlobalParameters
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.shared_outbox import SharedOutbox
from sidecar.cluster.shared_view import (
    DEFAULTS,
    PREFIX,
    SharedCounter,
    SharedView,
    counter_floor,
    counter_parameter,
    defaults_value,
    episode_floor,
    parse,
    settings_parameter,
    webhook_parameter,
)
from sidecar.cluster.shared_writes import SharedWrites
from sidecar.flow.engine import FlowEngine, StoreUnavailable
from sidecar.flow.persistence import FlowStore
from sidecar.model import QueueInfo, QueueKey

log = logging.getLogger("flow_sidecar.cluster")
MIGRATED_KEY = "shared_state_migrated"
PUBLISH_PER_POLL = 200  # counter writes per poll at most; the rest go at the next one
Counted = tuple[int, bool]  # (flowStoppedCount, stopped)


class SharedSync:
    """A `sidecar.flow.poller.PollCompanion`, plus the counter publisher and migration."""

    def __init__(self, engine: FlowEngine, store: FlowStore, outbox: SharedOutbox,
                 params: GlobalParameters, writes: SharedWrites, *, join_window: float,
                 owners: GrantOwnership, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.store = store
        self.outbox = outbox
        self.params = params
        self.writes = writes
        self.join_window = join_window
        self.owners = owners
        self.clock = clock
        self.migrated = isinstance(store.get_value(MIGRATED_KEY), dict)
        # the local state to migrate, taken now, before anything can change it
        self._unmigrated = None if self.migrated else self._local_state()
        self._migration_written: int | None = None  # set by read(), recorded by apply()
        self.last_error: str | None = None
        self.reads = 0
        # (view, write generation, when the heartbeat before it was started)
        self._read: tuple[SharedView, int, float] | None = None
        self._latest = SharedView()
        self._reported: set[str] = set()
        self._published: dict[QueueKey, Counted] = {}
        self._published_warnings: dict[QueueKey, Counted] = {}
        self._publishing: asyncio.Future[None] | None = None
        # called with each applied view once its members are known (the shared reports)
        self.on_view: list[Callable[[SharedView], None]] = []

    # -- the poll companion ------------------------------------------------------------
    def read(self) -> None:
        """Read the shared state (worker thread)."""
        generation = self.writes.generation
        started = self.clock()
        try:
            self.params.put(*self.owners.heartbeat(started))
            if self._unmigrated is not None:
                self._migration_written = self._push_missing(self._unmigrated)
                self._unmigrated = None
            view = parse(self.params.read(PREFIX))
        except BrokerError as exc:
            if self.last_error is None:  # one line per outage, not per poll
                log.warning("the shared state could not be read: %s; serving the cached "
                            "settings", exc)
            self.last_error = str(exc)
            self._read = None
            return
        if self.last_error is not None:
            log.info("the shared state is read again")
        self.last_error = None
        self._read = (view, generation, started)

    def apply(self, now: float) -> None:
        """Apply the last read (event loop, before the poll's queues)."""
        if self._migration_written is not None:
            self.store.set_value(MIGRATED_KEY, {"at": now, "written": self._migration_written})
            log.info("shared state: %d local settings, defaults, subscriptions and counters "
                     "written to the broker's global parameters", self._migration_written)
            self.migrated, self._migration_written = True, None
        read, self._read = self._read, None
        if read is None:
            return
        view, generation, started = read
        self.owners.observe(view.replicas, view.credit, started)
        for hook in self.on_view:
            hook(view)
        self.reads += 1
        self._latest = view
        for problem in view.problems:
            if problem not in self._reported:
                self._reported.add(problem)
                log.warning("%s", problem)
        settled = self.migrated and generation % 2 == 0 and generation == self.writes.generation
        changes = self._settings_changes(view) if settled else {}
        floors = self._floors(view, now)
        try:
            self.engine.adopt_shared(changes, floors, now,
                                     {key: view.classes.get(key) for key in changes})
            if settled:
                self._adopt_defaults(view, now)
                self.outbox.adopt(view.webhooks)
        except StoreUnavailable:
            pass  # logged by the engine; the next poll tries again
        except Exception:
            log.exception("applying the shared state failed; the next poll tries again")

    def _settings_changes(self, view: SharedView) -> dict[QueueKey, dict[str, float] | None]:
        keys = set(view.settings) | set(self.engine.settings_keys())
        return {key: view.settings.get(key) for key in keys
                if view.settings.get(key) != self.engine.stored_settings(key)
                or view.classes.get(key) != self.engine.stored_classes(key)}

    def _floors(self, view: SharedView, now: float) -> dict[QueueKey, int]:
        floors = {}
        for key, shared in view.counters.items():
            entry = self.engine.entry(key)
            stopped = entry.state.stopped if entry is not None else False
            count = entry.state.stopped_count if entry is not None else (
                self.engine.stored_count(key))
            floor = counter_floor(shared, stopped, now, self.join_window)
            if floor > count:
                floors[key] = floor
        return floors

    def _adopt_defaults(self, view: SharedView, now: float) -> None:
        wanted = view.defaults or self.engine.startup_defaults
        if wanted != self.engine.defaults:
            self.engine.set_defaults(view.defaults, now)

    # -- counters: recorded after the poll, off the event loop -------------------------------
    def publish(self, _infos: list[QueueInfo], now: float) -> None:
        """Poll hook: write the counters this replica is ahead on, or whose state it saw
        change, unless a write is still under way."""
        if self._publishing is not None and not self._publishing.done():
            return
        due: dict[tuple[QueueKey, bool], SharedCounter] = {}  # by (queue, warning)
        for entry in self.engine.entries():
            key = entry.key
            counter = _due(key, (entry.state.stopped_count, entry.state.stopped),
                           self._latest.counters.get(key), self._published, now)
            if counter is not None:
                due[key, False] = counter
            episodes = entry.episodes
            if episodes.count:
                counter = _due(key, (episodes.count, episodes.active),
                               self._latest.warnings.get(key), self._published_warnings, now)
                if counter is not None:
                    due[key, True] = counter
            if len(due) >= PUBLISH_PER_POLL:
                break
        if due:
            self._publishing = asyncio.ensure_future(asyncio.to_thread(self._put_counters, due))

    def _put_counters(self, due: dict[tuple[QueueKey, bool], SharedCounter]) -> None:
        for (key, warning), counter in due.items():
            try:
                self.params.put(*counter_parameter(key, counter, warning))
            except BrokerError as exc:
                log.warning("%s of %s/%s not recorded in the shared state (%s); retried next "
                            "poll", "warning episodes" if warning else "flowStoppedCount",
                            key[0], key[1], exc)
                return
            published = self._published_warnings if warning else self._published
            published[key] = (counter.count, counter.stopped)

    def episode_floor(self, key: QueueKey) -> int:
        """The number a warning episode of `key` starting now comes after, by the other
        replicas' record of its episodes (`FigureIntake.episode_floor`)."""
        return episode_floor(self._latest.warnings.get(key), self.clock(), self.join_window)

    # -- migration --------------------------------------------------------------------------
    def _local_state(self) -> dict[str, Any]:
        """What this replica has, as {parameter name: value} (taken before it runs)."""
        local: dict[str, Any] = {}
        for key in self.engine.settings_keys():
            name, value = settings_parameter(key, self.engine.stored_settings(key) or {},
                                             self.engine.stored_classes(key))
            local[name] = value
        if self.engine.defaults != self.engine.startup_defaults:
            local[DEFAULTS] = defaults_value(self.engine.defaults)
        for sub in self.outbox.subscriptions():
            name, value = webhook_parameter(sub)
            local[name] = value
        now = self.clock()
        for key, state in self.store.load_states().items():
            if state.stopped_count > 0:
                name, value = counter_parameter(key, SharedCounter(
                    state.stopped_count, state.stopped, now))
                local[name] = value
        return local

    def _push_missing(self, local: dict[str, Any]) -> int:
        shared = self.params.read(PREFIX)
        written = 0
        for name, value in local.items():
            if name not in shared:
                self.params.put(name, value)
                written += 1
        return written


def _due(key: QueueKey, mine: Counted, shared: SharedCounter | None,
         published: dict[QueueKey, Counted], now: float) -> SharedCounter | None:
    """The record to write for a count this replica is ahead on, or whose state it saw
    change (e.g. it saw the queue resume); None when the shared record stands."""
    recorded = None if shared is None else (shared.count, shared.stopped)
    if mine[0] == 0 or mine == recorded:
        published[key] = mine
        return None
    ahead = recorded is None or mine[0] > recorded[0]
    seen_here = recorded is not None and mine[0] == recorded[0] and mine != published.get(key)
    return SharedCounter(mine[0], mine[1], now) if ahead or seen_here else None
