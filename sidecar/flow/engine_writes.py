"""The engine's writes: a queue's settings, the defaults, a vhost's settings, and what
other replicas stored. Each is one transaction, all or nothing: the settings row, the
states it changes and their webhook events commit together, or nothing changed, in memory
or on disk (`StoreUnavailable`). A mixin of `FlowEngine`, which owns every queue's state;
split from it only to keep each module readable.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict
from typing import Protocol

from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.journal import Journal
from sidecar.flow.persistence import FlowStore, StoredState
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.state_machine import FlowState
from sidecar.flow.thresholds import DefaultPolicy, SourceProblem, validate_settings
from sidecar.model import Change, QueueKey

log = logging.getLogger("flow_sidecar.flow")
DEFAULTS_KEY = "defaults"


class StoreUnavailable(RuntimeError):
    """A write could not be committed; nothing of it was kept, in memory or on disk."""


class SettingsRejected(ValueError):
    """Settings that Qpid's rules refuse; nothing was stored."""

    def __init__(self, problems: list[SourceProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class EngineState(Protocol):
    """What the writes need of the engine they are mixed into."""

    store: FlowStore
    defaults: DefaultPolicy
    startup_defaults: DefaultPolicy
    broker_wide: BrokerWide
    journal: Journal
    _settings: dict[QueueKey, dict[str, int]]
    _queues: dict[QueueKey, QueueEntry]
    _defaults_stored: bool

    def _apply_config(self, key: QueueKey, now: float, reason: str) -> None: ...
    def _update_told(self, entry: QueueEntry, now: float, reason: str) -> None: ...
    def _mark_dirty(self, entry: QueueEntry) -> None: ...
    def _revise(self, entry: QueueEntry) -> None: ...
    def _commit(self, now: float, write: Callable[[], object] | None = None) -> list[Change]: ...
    def _all_or_nothing(self, keys: list[QueueKey]) -> AbstractContextManager[None]: ...
    def _cache_settings(self: EngineState, settings: Mapping[QueueKey, Mapping[str, int] | None],
                        now: float) -> None: ...
    def _raise_count(self: EngineState, key: QueueKey, floor: int) -> None: ...


class SettingsWrites:
    """The writes of `FlowEngine` (see the module docstring)."""

    # -- settings: each write is one transaction, all or nothing ------------------------
    def put_settings(self: EngineState, key: QueueKey, values: Mapping[str, int],
                     now: float) -> None:
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

    def delete_settings(self: EngineState, key: QueueKey, now: float) -> bool:
        """Forget a queue's API settings; its arguments and defaults apply again. False
        when none were stored."""
        if key not in self._settings:
            return False
        with self._all_or_nothing([key]):
            del self._settings[key]
            self._apply_config(key, now, "settings removed")
            self._commit(now, lambda: self.store.delete_settings(key))
        return True

    def set_defaults(self: EngineState, policy: DefaultPolicy | None, now: float) -> None:
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

    def reconfigure_vhost(self: EngineState, vhost: str, now: float, change: Callable[[], object],
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
    def adopt_shared(self: EngineState, settings: Mapping[QueueKey, Mapping[str, int] | None],
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

    def _cache_settings(self: EngineState, settings: Mapping[QueueKey, Mapping[str, int] | None],
                        now: float) -> None:
        for key, values in settings.items():
            if values is None:
                self.store.delete_settings(key)
            else:
                self.store.put_settings(key, values, now)

    def _raise_count(self: EngineState, key: QueueKey, floor: int) -> None:
        entry = self._queues.get(key)
        if entry is not None and entry.state.stopped_count < floor:
            entry.state = FlowState(entry.state.stopped, floor)
            self._revise(entry)
            self._mark_dirty(entry)
        stored = self.journal.stored.get(key, StoredState(False, 0, 0))
        if entry is None and stored.stopped_count < floor:
            self.journal.record(key, StoredState(stored.stopped, floor, stored.version))

    @contextmanager
    def _all_or_nothing(self: EngineState, keys: list[QueueKey]) -> Iterator[None]:
        """Undo every in-memory effect of a write whose commit failed: settings, defaults,
        the touched entries and whatever was waiting for the next commit."""
        saved_settings = {k: self._settings.get(k) for k in keys}
        saved_entries = {k: copy.copy(e) for k in keys if (e := self._queues.get(k))}
        saved = (self.defaults, self.journal.snapshot())
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
            self.defaults, journal = saved
            self.journal.restore(journal)
            self.broker_wide.restore(saved_wide)
            log.error("a settings write could not be stored (%s: %s); nothing was changed",
                      type(exc).__name__, exc)
            raise StoreUnavailable(f"the settings store could not commit: {exc}") from exc

