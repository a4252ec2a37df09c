"""The engine's writes: a queue's settings, the defaults, a vhost's settings, and what
other replicas stored. Each is one transaction, all or nothing: the settings row, the
states it changes and their webhook events commit together, or nothing changed, in memory
or on disk (`StoreUnavailable`). `FlowEngine` owns one `SettingsWrites`, which keeps the
settings and defaults and reaches the queues only through `EngineSide`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from typing import Protocol

from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.fill_rate import WarningPolicy, warning_policy, warning_problems
from sidecar.flow.persistence import FlowStore
from sidecar.flow.queue_entry import NO_WARNING_SETTINGS, QueueEntry
from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.thresholds import DefaultPolicy, SourceProblem, validate_settings
from sidecar.model import Change, QueueKey

log = logging.getLogger("flow_sidecar.flow")
DEFAULTS_KEY = "defaults"


def settings_problems(values: Mapping[str, object], limits: QueueLimits | None,
                      policy: DefaultPolicy) -> list[SourceProblem]:
    """Every reason to refuse a queue's or a vhost's settings: Qpid's rules for the
    qpid.flow_* keys, `warning_problems` for the warning ones."""
    return validate_settings(values, limits, policy) + warning_problems(values)


class StoreUnavailable(RuntimeError):
    """A write could not be committed; nothing of it was kept, in memory or on disk."""


class SettingsRejected(ValueError):
    """Settings that Qpid's rules refuse; nothing was stored."""

    def __init__(self, problems: list[SourceProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class EngineSide(Protocol):
    """What the writes need of the engine: its store and queues, a queue re-evaluated on
    new settings, a counter raised, its state saved for an undo, and the commit."""

    store: FlowStore

    def entry(self, key: QueueKey) -> QueueEntry | None: ...
    def keys(self) -> list[QueueKey]: ...
    def reconfigure(self, key: QueueKey, now: float, reason: str, *,
                    retell: bool = False) -> None: ...
    def raise_count(self, key: QueueKey, floor: int) -> None: ...
    def saved(self, keys: list[QueueKey]) -> Callable[[], None]: ...
    def commit(self, now: float, write: Callable[[], object] | None = None) -> list[Change]: ...


class SettingsWrites:
    """The settings and defaults in effect, and the writes that change them (see the
    module docstring)."""

    def __init__(self, engine: EngineSide, startup_defaults: DefaultPolicy) -> None:
        self.engine = engine
        self.startup_defaults = startup_defaults
        stored = engine.store.get_value(DEFAULTS_KEY)
        self.defaults = DefaultPolicy(**stored) if isinstance(stored, dict) else startup_defaults
        # whether the defaults in effect were stored through the API (they then win over
        # the start-up options, restarts included) rather than being those options
        self.defaults_stored = isinstance(stored, dict)
        self.settings: dict[QueueKey, dict[str, float]] = engine.store.load_settings()
        # --warning-horizon / --warning-fraction (validated by the options), below a
        # queue's settings and its vhost's defaults (`warning_policy`)
        self.startup_warning: dict[str, float] = {}

    def warning_policy(self, key: QueueKey, wide: BrokerWide) -> WarningPolicy:
        """The queue's warning policy: its settings, its vhost's defaults, the start-up
        options, per key in that order; the built-in one is shared, no object per queue."""
        policy = warning_policy(self.settings.get(key), wide.queue_defaults(key[0]),
                                self.startup_warning)
        return NO_WARNING_SETTINGS if policy == NO_WARNING_SETTINGS else policy

    # -- settings: each write is one transaction, all or nothing ------------------------
    def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        """Validate, store and apply a queue's API settings (replacing earlier ones). The
        settings row, the states it changes and their webhook events commit together;
        StoreUnavailable when they could not, and then nothing changed."""
        engine, entry = self.engine, self.engine.entry(key)
        problems = settings_problems(values, entry.limits if entry else None, self.defaults)
        if problems:
            raise SettingsRejected(problems)
        with self._all_or_nothing([key]):
            self.settings[key] = dict(values)
            engine.reconfigure(key, now, "settings changed")
            engine.commit(now, lambda: engine.store.put_settings(key, values, now))

    def delete_settings(self, key: QueueKey, now: float) -> bool:
        """Forget a queue's API settings; its arguments and defaults apply again. False
        when none were stored."""
        if key not in self.settings:
            return False
        engine = self.engine
        with self._all_or_nothing([key]):
            del self.settings[key]
            engine.reconfigure(key, now, "settings removed")
            engine.commit(now, lambda: engine.store.delete_settings(key))
        return True

    def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        """Change the broker-wide default percentages/limit at run time (None: back to the
        start-up options). Persisted, so a restart keeps what the operator chose."""
        chosen = policy or self.startup_defaults
        if chosen.problems():
            raise ValueError("; ".join(chosen.problems()))
        engine, keys = self.engine, self.engine.keys()
        with self._all_or_nothing(keys):
            self.defaults = chosen
            for key in keys:
                engine.reconfigure(key, now, "defaults changed")
            engine.commit(now, lambda: engine.store.set_value(
                DEFAULTS_KEY, None if policy is None else asdict(policy)))
        self.defaults_stored = policy is not None  # committed: a failure raised above

    def reconfigure_vhost(self, vhost: str, now: float, change: Callable[[], object],
                          write: Callable[[], object]) -> None:
        """Apply `change` to the broker-wide state (a vhost's quota or default thresholds,
        see `vhost_settings`), re-resolve and re-tell the vhost's queues, and store it with
        `write`: one transaction, all or nothing."""
        keys = [k for k in self.engine.keys() if k[0] == vhost]  # noqa: SIM118 (a list)
        with self._all_or_nothing(keys):
            change()
            for key in keys:
                self.engine.reconfigure(key, now, "vhost settings changed", retell=True)
            self.engine.commit(now, write)

    # -- shared state: what other replicas stored (sidecar.cluster) ---------------------
    def adopt_shared(self, settings: Mapping[QueueKey, Mapping[str, float] | None],
                     floors: Mapping[QueueKey, int], now: float) -> None:
        """Take in settings other replicas stored (None: deleted), re-evaluated as a local
        write is, and the least flowStoppedCount each queue may show; the settings are
        cached in the store in the same transaction. StoreUnavailable when that failed,
        and then nothing changed."""
        if not settings and not floors:
            return
        engine = self.engine
        with self._all_or_nothing([*settings, *floors]):
            for key, floor in floors.items():
                engine.raise_count(key, floor)
            for key, values in settings.items():
                if values is None:
                    self.settings.pop(key, None)
                else:
                    self.settings[key] = dict(values)
                engine.reconfigure(key, now, "settings changed through another replica")
            engine.commit(now, lambda: self._cache_settings(settings, now))

    def _cache_settings(self, settings: Mapping[QueueKey, Mapping[str, float] | None],
                        now: float) -> None:
        store = self.engine.store
        for key, values in settings.items():
            if values is None:
                store.delete_settings(key)
            else:
                store.put_settings(key, values, now)

    @contextmanager
    def _all_or_nothing(self, keys: list[QueueKey]) -> Iterator[None]:
        """Undo every in-memory effect of a write whose commit failed: settings, defaults,
        and in the engine the touched entries and whatever was waiting for the next
        commit."""
        saved_settings = {k: self.settings.get(k) for k in keys}
        defaults, restore = self.defaults, self.engine.saved(keys)
        try:
            yield
        except Exception as exc:
            for key, stored in saved_settings.items():
                if stored is None:
                    self.settings.pop(key, None)
                else:
                    self.settings[key] = stored
            self.defaults = defaults
            restore()
            log.error("a settings write could not be stored (%s: %s); nothing was changed",
                      type(exc).__name__, exc)
            raise StoreUnavailable(f"the settings store could not commit: {exc}") from exc
