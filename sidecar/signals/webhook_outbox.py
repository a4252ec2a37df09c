"""Webhook subscriptions and the durable outbox of events to deliver, in the sidecar's SQLite.

`on_change` is an engine listener. The engine calls it inside the transaction that persists
the transition, so a transition and its outgoing events are committed together: after
`kill -9` either both exist or neither does, and the delivery worker (which runs on the
same event loop, so only after that commit) never sees an event of an uncommitted state.
Each change gets a per-queue sequence number (one persisted counter per queue, shared by
all subscribers and advanced whether or not anyone is subscribed, so a gap tells a
receiver it missed events, e.g. while it was disabled) and each row a message id, so
every retry and every restart reuses the same `webhook-id`.

A *stream* is the events of one queue for one subscription; they are delivered strictly
in order, so only the oldest pending row of a stream is ever handed to the worker.
Used only from the event-loop thread, like the settings store.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any

from sidecar.flow.forecast import WarningNote
from sidecar.flow.persistence import Transactional
from sidecar.model import Change, QueueKey
from sidecar.name_patterns import NameTest, PatternError, encoded, glob_test
from sidecar.signals.event_json import webhook_warning

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS webhook_subscription (
        id TEXT PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL,
        vhost TEXT NOT NULL, queue TEXT NOT NULL,
        enabled INTEGER NOT NULL, disabled_reason TEXT, created_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS webhook_sequence (
        vhost TEXT NOT NULL, queue TEXT NOT NULL, last INTEGER NOT NULL,
        PRIMARY KEY (vhost, queue))""",
    """CREATE TABLE IF NOT EXISTS webhook_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL UNIQUE,
        subscription_id TEXT NOT NULL, vhost TEXT NOT NULL, queue TEXT NOT NULL,
        sequence INTEGER NOT NULL, body BLOB NOT NULL, created_at REAL NOT NULL,
        status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL, last_attempt_at REAL, last_status INTEGER,
        last_error TEXT, delivered_at REAL)""",
    """CREATE INDEX IF NOT EXISTS webhook_outbox_stream
        ON webhook_outbox (status, subscription_id, vhost, queue, id)""",
)
ROW_COLUMNS = ("id, msg_id, subscription_id, vhost, queue, sequence, body, created_at, "
                "status, attempts, next_attempt_at, last_attempt_at, last_status, "
                "last_error, delivered_at")
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"

StreamKey = tuple[str, str, str]  # (subscription id, vhost, queue)
EventBuilder = Callable[[Change, int, float], dict[str, Any]]  # (change, sequence, now)


class Outcome(StrEnum):
    """What one delivery attempt did to its row."""

    DELIVERED = "delivered"  # 2xx: done
    RETRY = "retry"  # anything else: try again at next_attempt_at
    FAILED = "failed"  # still failing at the give-up age: the stream moves on
    GONE = "gone"  # 410: the row waits, the subscription is disabled


@dataclass(frozen=True)
class Subscription:
    """Where to send which queues' events. The secret never leaves the sidecar."""

    id: str
    url: str
    secret: str = field(repr=False)
    vhost: str
    queue: str
    enabled: bool
    disabled_reason: str | None
    created_at: float
    warnings: bool = False  # also flow.warning / flow.warning-cleared (`on_warning`)

    def matches(self, key: QueueKey) -> bool:
        """True when the queue is in scope: vhost and queue name match their globs (in
        RE2, linear time: this runs on every change, inside its transaction)."""
        vhost, queue = self._globs
        return vhost(encoded(key[0])) and queue(encoded(key[1]))

    @cached_property
    def _globs(self) -> tuple[NameTest, NameTest]:
        return _stored_glob(self.vhost), _stored_glob(self.queue)


def _stored_glob(glob: str) -> NameTest:
    """A stored subscription's glob, without the length cap of new ones (it was accepted
    when it was made); one past RE2's memory, which only such a one can be, is read by
    fnmatch as before rather than fail every change's transaction."""
    try:
        return glob_test(glob, max_length=None)
    except PatternError:
        return lambda name: fnmatchcase(name.decode("utf-8", "surrogatepass"), glob)


@dataclass(frozen=True)
class OutboxRow:
    """One event for one subscription, with its delivery record."""

    id: int
    msg_id: str
    subscription_id: str
    vhost: str
    queue: str
    sequence: int
    body: bytes
    created_at: float
    status: str
    attempts: int
    next_attempt_at: float
    last_attempt_at: float | None
    last_status: int | None
    last_error: str | None
    delivered_at: float | None

    @property
    def stream(self) -> StreamKey:
        return (self.subscription_id, self.vhost, self.queue)


class WebhookOutbox:
    """Subscriptions (cached in memory for the listener) and their outbox rows."""

    def __init__(self, store: Transactional, event: EventBuilder, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.event = event
        self.clock = clock
        self.changed = asyncio.Event()  # set when the worker may have something new to do
        self._failures = 0
        with store.transaction() as db:
            for statement in SCHEMA:
                db.execute(statement)
            columns = {r[1] for r in db.execute("PRAGMA table_info(webhook_subscription)")}
            if "warnings" not in columns:  # a database from before issue 43
                db.execute("ALTER TABLE webhook_subscription ADD COLUMN warnings INTEGER "
                           "NOT NULL DEFAULT 0")
            rows = db.execute("SELECT id, url, secret, vhost, queue, enabled, disabled_reason,"
                              " created_at, warnings FROM webhook_subscription").fetchall()
        self._subs = {r[0]: Subscription(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7],
                                         bool(r[8])) for r in rows}

    # -- the engine listener -------------------------------------------------------------
    def on_change(self, change: Change) -> None:
        """Number the change and queue one event per matching enabled subscription; no I/O
        beyond SQLite. Every change takes a number, sent or not, so a receiver can tell
        from a gap that it missed events (disabled, subscribed later, filtered out)."""
        key = (change.vhost, change.queue)
        targets = [s.id for s in self._subs.values() if s.enabled and s.matches(key)]
        now = self.clock()
        with self.store.transaction() as db:
            sequence = self.number(db, change)
            if targets and sequence is not None:
                body = json.dumps(self.event(change, sequence, now), ensure_ascii=False,
                                  separators=(",", ":")).encode()
                db.executemany(
                    "INSERT OR IGNORE INTO webhook_outbox (msg_id, subscription_id, vhost,"
                    " queue, sequence, body, created_at, status, next_attempt_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(self.message_id(sub, key, sequence), sub, *key, sequence, body, now,
                      PENDING, now) for sub in targets])
        if targets and sequence is not None:
            self.changed.set()

    def on_warning(self, note: WarningNote) -> None:
        """Engine warning store listener: one event per matching enabled subscription that
        asked for warnings, carrying the queue's last flow sequence (it takes none)."""
        key = note.key
        targets = [s.id for s in self._subs.values()
                   if s.enabled and s.warnings and s.matches(key)]
        if not targets:
            return
        now = self.clock()
        with self.store.transaction() as db:
            row = db.execute("SELECT last FROM webhook_sequence WHERE vhost = ? AND queue = ?",
                             key).fetchone()
            sequence = int(row[0]) if row else 0
            body = json.dumps(webhook_warning(note, sequence, now), ensure_ascii=False,
                              separators=(",", ":")).encode()
            db.executemany(
                "INSERT INTO webhook_outbox (msg_id, subscription_id, vhost, queue, sequence,"
                " body, created_at, status, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(self.warning_id(sub, note), sub, *key, sequence, body, now, PENDING, now)
                 for sub in targets])
        self.changed.set()

    def number(self, db: sqlite3.Connection, change: Change) -> int | None:
        """The change's sequence number: the queue's next (None would mean: send nothing)."""
        key = (change.vhost, change.queue)
        row = db.execute("SELECT last FROM webhook_sequence WHERE vhost = ? AND queue = ?",
                         key).fetchone()
        sequence = int(row[0] if row else 0) + 1
        db.execute("INSERT OR REPLACE INTO webhook_sequence VALUES (?, ?, ?)", (*key, sequence))
        return sequence

    def message_id(self, sub_id: str, key: QueueKey, sequence: int) -> str:
        """The `webhook-id` of one event for one subscription: unique, kept by retries."""
        return f"msg_{uuid.uuid4().hex}"

    def warning_id(self, sub_id: str, note: WarningNote) -> str:
        """The `webhook-id` of one warning event for one subscription (as `message_id`)."""
        return f"msg_{uuid.uuid4().hex}"

    # -- subscriptions --------------------------------------------------------------------
    def subscriptions(self) -> list[Subscription]:
        """Every subscription, oldest first."""
        return sorted(self._subs.values(), key=lambda s: (s.created_at, s.id))

    def get(self, sub_id: str) -> Subscription | None:
        return self._subs.get(sub_id)

    def create(self, *, url: str, secret: str, vhost: str, queue: str,
               warnings: bool = False) -> Subscription:
        """Store a new, enabled subscription; it receives events from now on."""
        sub = Subscription(f"wh_{uuid.uuid4().hex[:16]}", url, secret, vhost, queue, True,
                           None, self.clock(), warnings)
        self.save(sub)
        return sub

    def save(self, sub: Subscription) -> None:
        """Store a subscription as it is (new, or changed elsewhere)."""
        with self.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO webhook_subscription (id, url, secret, vhost,"
                       " queue, enabled, disabled_reason, created_at, warnings) VALUES (?, ?,"
                       " ?, ?, ?, ?, ?, ?, ?)", (sub.id, sub.url, sub.secret, sub.vhost,
                                                 sub.queue, int(sub.enabled),
                                                 sub.disabled_reason, sub.created_at,
                                                 int(sub.warnings)))
        self._subs[sub.id] = sub
        self.changed.set()

    def delete(self, sub_id: str) -> bool:
        """Forget a subscription and its outbox rows; False if there was none."""
        with self.store.transaction() as db:
            db.execute("DELETE FROM webhook_outbox WHERE subscription_id = ?", (sub_id,))
            cursor = db.execute("DELETE FROM webhook_subscription WHERE id = ?", (sub_id,))
        self._subs.pop(sub_id, None)
        return cursor.rowcount > 0

    def set_enabled(self, sub_id: str, enabled: bool,
                    reason: str | None = None) -> Subscription | None:
        """Enable (pending rows resume where they stopped) or disable (rows wait)."""
        sub = self._subs.get(sub_id)
        if sub is None:
            return None
        reason = None if enabled else reason
        with self.store.transaction() as db:
            db.execute("UPDATE webhook_subscription SET enabled = ?, disabled_reason = ? "
                       "WHERE id = ?", (int(enabled), reason, sub_id))
        sub = self._subs[sub_id] = replace(sub, enabled=enabled, disabled_reason=reason)
        self.changed.set()
        return sub

    # -- rows -------------------------------------------------------------------------------
    def heads(self) -> list[OutboxRow]:
        """The oldest pending row of every stream of an enabled subscription, soonest due
        first: the only rows the worker may attempt (that is what keeps streams in order)."""
        return self._rows(
            f"SELECT {ROW_COLUMNS} FROM webhook_outbox WHERE id IN ("
            " SELECT MIN(o.id) FROM webhook_outbox o JOIN webhook_subscription s"
            " ON s.id = o.subscription_id AND s.enabled = 1 WHERE o.status = ?"
            " GROUP BY o.subscription_id, o.vhost, o.queue) ORDER BY next_attempt_at",
            (PENDING,))

    def deliveries(self, sub_id: str, limit: int) -> list[OutboxRow]:
        """A subscription's most recent rows, newest first."""
        return self._rows(f"SELECT {ROW_COLUMNS} FROM webhook_outbox WHERE subscription_id = ?"
                          " ORDER BY id DESC LIMIT ?", (sub_id, limit))

    def status_counts(self) -> dict[str, dict[str, int]]:
        """{subscription id: {status: rows}} for the subscriptions' views."""
        out: dict[str, dict[str, int]] = {}
        with self.store.transaction() as db:
            for sub_id, status, n in db.execute(
                    "SELECT subscription_id, status, COUNT(*) FROM webhook_outbox"
                    " GROUP BY subscription_id, status"):
                out.setdefault(sub_id, {})[status] = n
        return out

    def record(self, row: OutboxRow, outcome: Outcome, *, at: float, http_status: int | None,
               error: str | None, next_attempt_at: float | None = None) -> None:
        """Write down one attempt and what it means for the row (and, on 410, for the
        subscription)."""
        status = {Outcome.DELIVERED: DELIVERED, Outcome.FAILED: FAILED}.get(outcome, PENDING)
        if outcome is not Outcome.DELIVERED:
            self._failures += 1
        with self.store.transaction() as db:
            db.execute(
                "UPDATE webhook_outbox SET status = ?, attempts = attempts + 1,"
                " last_attempt_at = ?, last_status = ?, last_error = ?,"
                " next_attempt_at = COALESCE(?, next_attempt_at), delivered_at = ?"
                " WHERE id = ?",
                (status, at, http_status, error, next_attempt_at,
                 at if outcome is Outcome.DELIVERED else None, row.id))
            if outcome is Outcome.GONE:
                self.set_enabled(row.subscription_id, False,
                                 "the receiver answered 410 Gone")

    def prune(self, before: float) -> int:
        """Drop finished rows last touched before `before` (pending rows are never
        dropped); returns how many went."""
        with self.store.transaction() as db:
            cursor = db.execute(
                "DELETE FROM webhook_outbox WHERE status != ? AND"
                " COALESCE(delivered_at, last_attempt_at, created_at) < ?", (PENDING, before))
        return cursor.rowcount

    # -- for /metrics ---------------------------------------------------------------------
    def outbox_depth(self) -> int:
        """Events waiting for delivery, including those of disabled subscriptions."""
        with self.store.transaction() as db:
            row = db.execute("SELECT COUNT(*) FROM webhook_outbox WHERE status = ?",
                             (PENDING,)).fetchone()
        return int(row[0])

    def failures_total(self) -> int:
        """Delivery attempts that did not get a 2xx, since the sidecar started."""
        return self._failures

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[OutboxRow]:
        with self.store.transaction() as db:
            return [OutboxRow(*r) for r in db.execute(sql, params).fetchall()]
