"""What the flow engine and the webhook outbox need from durable storage, as protocols.

The sidecar's core never names a database: the composition root (`api.main`) hands it the
settings store (`api.store.Store`, SQLite) and tests may hand it anything with these
methods. `transaction()` is the one unit of atomicity: everything written inside it (a
queue's settings or a vhost's quota, the states they change, the webhook events of those
changes) commits together or not at all, and a nested use is a savepoint inside the
outer one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from sidecar.model import QueueKey


class TransactionLost(sqlite3.Error):
    """The outer transaction is gone: nothing of it will be committed."""


@dataclass(frozen=True)
class StoredState:
    """A queue's last persisted flow state, counter and answer version."""

    stopped: bool
    stopped_count: int
    version: int


@dataclass(frozen=True)
class StoredVhostState:
    """A vhost's last persisted quota state, its overfull counter and last transition."""

    stopped: bool
    stopped_count: int
    since: float | None


class Transactional(Protocol):
    """A database with atomic writes (the webhook outbox keeps its tables in one)."""

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One atomic write; nested, a savepoint."""
        ...


class FlowStore(Transactional, Protocol):
    """Settings, counters and states that must survive `kill -9`."""

    def load_settings(self) -> dict[QueueKey, dict[str, float]]:
        """Every queue's stored qpid.flow_* settings."""
        ...

    def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        """Replace a queue's stored settings."""
        ...

    def delete_settings(self, key: QueueKey) -> bool:
        """Forget a queue's stored settings; False if there were none."""
        ...

    def load_states(self) -> dict[QueueKey, StoredState]:
        """Every queue's last state, counter and version."""
        ...

    def save_states(self, states: Mapping[QueueKey, StoredState], now: float) -> None:
        """Persist changed states."""
        ...

    def get_value(self, key: str) -> object | None:
        """A small JSON value (runtime defaults), or None."""
        ...

    def set_value(self, key: str, value: object | None) -> None:
        """Store a small JSON value; None deletes it."""
        ...

    def load_vhost_settings(self, kind: str) -> dict[str, dict[str, float]]:
        """Every vhost's stored values of one kind (`quota`, `defaults`)."""
        ...

    def put_vhost_settings(self, kind: str, vhost: str, values: Mapping[str, float] | None,
                           now: float) -> None:
        """Replace a vhost's stored values of one kind; None deletes them."""
        ...

    def load_vhost_states(self) -> dict[str, StoredVhostState]:
        """Every vhost's last quota state and counter."""
        ...

    def save_vhost_states(self, states: Mapping[str, StoredVhostState], now: float) -> None:
        """Persist changed vhost states."""
        ...
