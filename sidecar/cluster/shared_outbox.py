"""The webhook outbox of a replica that shares its state (`--shared-state broker`).

Each replica still writes the events of its transitions to its own SQLite outbox, in the
transaction of the transition (nothing is lost to a `kill -9` between the two), but does not
deliver them: `webhook_queue.Forwarder` hands them to the cluster's durable delivery queue
and marks them `forwarded`, and the one replica that consumes that queue delivers them.

Every replica runs the same state machine on the same broker figures and sees the same
transitions, so each forwards its own copy of every event. For the copies to be one event
to the delivering replica and to receivers, an event is numbered by flow episode, not by a
replica's own count: the Nth OFF->ON of a queue (its shared `flowStoppedCount`, see
`shared_view.counter_floor`) is sequence 2N-1 and the ON->OFF that ends it 2N, and its
`webhook-id` is derived from subscription, queue and sequence. Changes of what one replica
tells producers because *its* broker reads are stale (`--on-stale stop|go`) are that
replica's own business and are not sent as webhooks in this mode.

Warning episodes are numbered alike (the shared record `flow-sidecar.warning.<digest>`,
`shared_view.episode_floor`): the start and the end of the Nth have a `webhook-id` derived
from subscription, queue, N and the kind, the same on every replica. They carry the last
flow sequence the replica numbered, as on a single node.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping

from sidecar.flow.fill_rate import WarningKind
from sidecar.flow.forecast import WarningNote
from sidecar.flow.state_machine import EventKind
from sidecar.model import Change, QueueKey
from sidecar.signals.webhook_outbox import (
    DELIVERED,
    FAILED,
    PENDING,
    ROW_COLUMNS,
    OutboxRow,
    Subscription,
    WebhookOutbox,
)

FORWARDED = "forwarded"


def episode_sequence(change: Change) -> int | None:
    """2N-1 for the Nth flow stop of a queue, 2N for the resume that ends it (including the
    queue's deletion while stopped); None for changes that are not the queue's own."""
    if change.event is not None:
        overfull = change.event.kind is EventKind.OVERFULL
        return 2 * change.stopped_count - (1 if overfull else 0)
    if change.reason == "queue deleted":
        return 2 * change.stopped_count
    return None


def stable_message_id(sub_id: str, key: QueueKey, sequence: int | str) -> str:
    """The same `webhook-id` on every replica for the same event of the same subscription:
    a flow event by its sequence, a warning by `warning_token`."""
    text = "\n".join((sub_id, key[0], key[1], str(sequence)))
    return "msg_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def warning_token(kind: WarningKind, episode: int) -> str:
    """What names a warning event of a queue in its `webhook-id`: its kind and episode
    (never a flow sequence, which is a bare number)."""
    return f"{kind}:{episode}"


class SharedOutbox(WebhookOutbox):
    """Events numbered by episode, forwarded rather than delivered here."""

    def number(self, db: sqlite3.Connection, change: Change) -> int | None:
        sequence = episode_sequence(change)
        if sequence is not None:  # the last one, for the warnings that follow (`on_warning`)
            db.execute("INSERT OR REPLACE INTO webhook_sequence VALUES (?, ?, ?)",
                       (change.vhost, change.queue, sequence))
        return sequence

    def message_id(self, sub_id: str, key: QueueKey, sequence: int) -> str:
        return stable_message_id(sub_id, key, sequence)

    def warning_id(self, sub_id: str, note: WarningNote) -> str:
        return stable_message_id(sub_id, note.key,
                                 warning_token(note.event.kind, note.event.episode))

    def to_forward(self, limit: int) -> list[OutboxRow]:
        """Events not yet handed to the delivery queue, oldest first."""
        return self._rows(f"SELECT {ROW_COLUMNS} FROM webhook_outbox WHERE status = ?"
                          " ORDER BY id LIMIT ?", (PENDING, limit))

    def mark_forwarded(self, rows: list[OutboxRow]) -> None:
        """The delivery queue has these events (the broker confirmed them)."""
        with self.store.transaction() as db:
            db.executemany("UPDATE webhook_outbox SET status = ? WHERE id = ? AND status = ?",
                           [(FORWARDED, row.id, PENDING) for row in rows])

    def finish(self, msg_id: str, delivered: bool, *, at: float, attempts: int,
               http_status: int | None, error: str | None) -> None:
        """Write the outcome of an event this replica delivered onto its own copy of it, if
        it has one, for `/webhooks/{id}/deliveries`."""
        with self.store.transaction() as db:
            db.execute(
                "UPDATE webhook_outbox SET status = ?, attempts = ?, last_attempt_at = ?,"
                " last_status = ?, last_error = ?, delivered_at = ? WHERE msg_id = ?",
                (DELIVERED if delivered else FAILED, attempts, at, http_status, error,
                 at if delivered else None, msg_id))

    def adopt(self, subscriptions: Mapping[str, Subscription]) -> None:
        """Make this replica's subscriptions those of the shared state: new and changed
        ones stored, those gone forgotten with their events."""
        for gone in [s.id for s in self.subscriptions() if s.id not in subscriptions]:
            self.delete(gone)
        for sub in subscriptions.values():
            if self.get(sub.id) != sub:
                self.save(sub)
