"""The settings store, in SQLite: per-queue settings, counters and last states, runtime
defaults, vhost quotas and defaults, vhost quota states.

One database file in the data directory, in WAL mode with `synchronous=NORMAL`: every
committed transaction survives `kill -9` of the sidecar (only an OS crash or power loss can
lose the last commits). All writes of one poll cycle go into one transaction, so a cycle
with a thousand transitions costs one commit. Used only from the event-loop thread.

It lives in the API layer (SPEC section 1): the sidecar's core sees it only through
`sidecar.flow.persistence.FlowStore`, and the composition root (`api.main`) hands it in.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sidecar.flow.fill_rate import WARNING_KEYS
from sidecar.flow.persistence import StoredState, StoredVhostState, TransactionLost
from sidecar.flow.thresholds import FLOW_KEYS
from sidecar.model import QueueKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (
    vhost TEXT NOT NULL, queue TEXT NOT NULL,
    stop_count INTEGER, resume_count INTEGER, stop_size INTEGER, resume_size INTEGER,
    updated_at REAL NOT NULL,
    PRIMARY KEY (vhost, queue)
);
CREATE TABLE IF NOT EXISTS queue_state (
    vhost TEXT NOT NULL, queue TEXT NOT NULL,
    stopped INTEGER NOT NULL, stopped_count INTEGER NOT NULL, version INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (vhost, queue)
);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vhost_settings (
    kind TEXT NOT NULL, vhost TEXT NOT NULL, vals TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (kind, vhost)
);
CREATE TABLE IF NOT EXISTS vhost_state (
    vhost TEXT PRIMARY KEY, stopped INTEGER NOT NULL, stopped_count INTEGER NOT NULL,
    since REAL, updated_at REAL NOT NULL
);
"""
_COLUMNS = ("stop_count", "resume_count", "stop_size", "resume_size")
# added after the table (issue 43): a database from before gets them by ALTER TABLE
_WARNING_COLUMNS = ("warning_horizon", "warning_fraction")
_SETTING_KEYS = (*FLOW_KEYS, *WARNING_KEYS)


class Store:
    """The sidecar's SQLite database."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(settings)")}
        for column in _WARNING_COLUMNS:
            if column not in have:
                self._db.execute(f"ALTER TABLE settings ADD COLUMN {column} REAL")
        self._depth = 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write. A nested use is a savepoint inside the outer transaction: if
        it fails, its writes are undone and the outer one may still commit the rest."""
        if self._depth:
            savepoint = f"nested_{self._depth}"
            self._db.execute(f"SAVEPOINT {savepoint}")
            self._depth += 1
            try:
                yield self._db
            except BaseException as exc:
                self._end_savepoint(savepoint, exc)
                raise
            else:
                self._end_savepoint(savepoint, None)
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # a failed COMMIT can leave it open
                self._db.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0

    def _end_savepoint(self, savepoint: str, failure: BaseException | None) -> None:
        """Release (after undoing, on failure) a nested savepoint; TransactionLost when
        SQLite already rolled the whole transaction back (a full disk, an I/O error), for
        then nothing written so far will be committed and the caller must know."""
        if not self._db.in_transaction:
            raise TransactionLost("SQLite rolled the transaction back") from failure
        if failure is not None:
            self._db.execute(f"ROLLBACK TO {savepoint}")
        self._db.execute(f"RELEASE {savepoint}")

    # -- settings -------------------------------------------------------------------
    def load_settings(self) -> dict[QueueKey, dict[str, float]]:
        """Every stored settings row as {qpid.flow_* or flow.warning_* key: value} without
        unset keys."""
        rows = self._db.execute(f"SELECT vhost, queue, {', '.join(_COLUMNS)}, "
                                f"{', '.join(_WARNING_COLUMNS)} FROM settings")
        return {
            (vhost, queue): {k: v for k, v in zip(_SETTING_KEYS, values) if v is not None}
            for vhost, queue, *values in rows
        }

    def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        """Replace a queue's stored settings."""
        with self.transaction() as db:
            db.execute(
                f"INSERT OR REPLACE INTO settings (vhost, queue, {', '.join(_COLUMNS)}, "
                f"{', '.join(_WARNING_COLUMNS)}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, *(values.get(k) for k in _SETTING_KEYS), now),
            )

    def delete_settings(self, key: QueueKey) -> bool:
        """Forget a queue's stored settings; False if there were none."""
        with self.transaction() as db:
            cursor = db.execute("DELETE FROM settings WHERE vhost = ? AND queue = ?", key)
        return cursor.rowcount > 0

    # -- flow state -----------------------------------------------------------------
    def load_states(self) -> dict[QueueKey, StoredState]:
        """Every queue's last state, counter and version."""
        rows = self._db.execute(
            "SELECT vhost, queue, stopped, stopped_count, version FROM queue_state"
        )
        return {(v, q): StoredState(bool(s), c, ver) for v, q, s, c, ver in rows}

    def save_states(self, states: Mapping[QueueKey, StoredState], now: float) -> None:
        """Persist changed states in one transaction."""
        if not states:
            return
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO queue_state VALUES (?, ?, ?, ?, ?, ?)",
                [(*k, int(s.stopped), s.stopped_count, s.version, now) for k, s in states.items()],
            )

    # -- small named values (runtime defaults, ...) ------------------------------------
    def get_value(self, key: str) -> object | None:
        """A JSON value stored under `key`, or None."""
        row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_value(self, key: str, value: object | None) -> None:
        """Store a JSON value under `key`; None deletes it."""
        with self.transaction() as db:
            if value is None:
                db.execute("DELETE FROM kv WHERE key = ?", (key,))
            else:
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, json.dumps(value)))

    # -- vhosts: quotas and default thresholds (JSON maps by kind), quota states -----------
    def load_vhost_settings(self, kind: str) -> dict[str, dict[str, float]]:
        """Every vhost's stored values of one kind (`quota`, `defaults`)."""
        rows = self._db.execute("SELECT vhost, vals FROM vhost_settings WHERE kind = ?", (kind,))
        return {vhost: json.loads(vals) for vhost, vals in rows}

    def put_vhost_settings(self, kind: str, vhost: str, values: Mapping[str, float] | None,
                           now: float) -> None:
        """Replace a vhost's stored values of one kind; None deletes them."""
        with self.transaction() as db:
            if values is None:
                db.execute("DELETE FROM vhost_settings WHERE kind = ? AND vhost = ?",
                           (kind, vhost))
            else:
                db.execute("INSERT OR REPLACE INTO vhost_settings VALUES (?, ?, ?, ?)",
                           (kind, vhost, json.dumps(dict(values)), now))

    def load_vhost_states(self) -> dict[str, StoredVhostState]:
        """Every vhost's last quota state and overfull counter."""
        rows = self._db.execute("SELECT vhost, stopped, stopped_count, since FROM vhost_state")
        return {v: StoredVhostState(bool(s), c, since) for v, s, c, since in rows}

    def save_vhost_states(self, states: Mapping[str, StoredVhostState], now: float) -> None:
        """Persist changed vhost states in one transaction."""
        if not states:
            return
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vhost_state VALUES (?, ?, ?, ?, ?)",
                [(v, int(s.stopped), s.stopped_count, s.since, now) for v, s in states.items()])

    def close(self) -> None:
        """Close the database (the last commit is already durable)."""
        self._db.close()
