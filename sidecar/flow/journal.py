"""What the engine changed since its last commit, kept until one transaction commits it.

Every round of the engine (a poll, a live round, a settings write) changes queue states,
versions and what producers are told. Nothing of it may be observable before it is
durable: the journal collects the changed states, the changes for listeners, the queues
whose version moved and the log lines, and `commit` writes the states, the vhost states,
a settings write and what store listeners write (the webhook outbox) in one transaction;
only then are the lines logged and the other listeners and version watchers told. A commit
that fails keeps everything for the next one, and nobody outside the store heard of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.forecast import WarningNote
from sidecar.flow.persistence import FlowStore, StoredState, TransactionLost
from sidecar.model import Change, QueueKey

log = logging.getLogger("flow_sidecar.flow")
Told = TypeVar("Told", Change, WarningNote)


@dataclass
class Pending:
    """What waits for the next commit."""

    dirty: dict[QueueKey, StoredState] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    bumped: set[QueueKey] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)  # transitions, logged once committed
    warnings: list[WarningNote] = field(default_factory=list)  # episodes started or ended


class Journal:
    """The engine's pending changes and whom to tell once they are committed."""

    def __init__(self, stored: dict[QueueKey, StoredState]) -> None:
        # the last state of every queue ever seen, committed or pending (counter history)
        self.stored = stored
        self.pending = Pending()
        # told about every change after it is committed (streams, history)
        self.listeners: list[Callable[[Change], None]] = []
        # write to the store inside the change's own transaction (the webhook outbox), so
        # a transition and its outgoing events are committed together or not at all
        self.store_listeners: list[Callable[[Change], None]] = []
        # the same for warning episodes that started or ended (`forecast.WarningNote`)
        self.warning_listeners: list[Callable[[WarningNote], None]] = []
        self.warning_store_listeners: list[Callable[[WarningNote], None]] = []
        # called with a queue's key after any change of its answer's version (thresholds,
        # sources, staleness, state): what long-poll waiters wait for
        self.version_watchers: list[Callable[[QueueKey], None]] = []

    def record(self, key: QueueKey, state: StoredState) -> None:
        """A queue's state to store with the next commit."""
        self.pending.dirty[key] = self.stored[key] = state

    def snapshot(self) -> tuple[Pending, dict[QueueKey, StoredState]]:
        """What `restore` puts back (for a write that must leave nothing behind)."""
        p = self.pending
        return (Pending(dict(p.dirty), list(p.changes), set(p.bumped), list(p.lines),
                        list(p.warnings)),
                dict(self.stored))

    def restore(self, saved: tuple[Pending, dict[QueueKey, StoredState]]) -> None:
        self.pending, self.stored = saved

    def commit(self, store: FlowStore, broker_wide: BrokerWide, now: float,
               write: Callable[[], object] | None = None) -> list[Change]:
        """Persist `write`, the changed states and what store listeners write for the
        changes, in one transaction; then log and tell (see the module docstring)."""
        taken, self.pending = self.pending, Pending()
        vhost_states, vhost_lines = broker_wide.take_pending()
        lines = taken.lines + vhost_lines
        if not taken.changes and not taken.dirty and not vhost_states and write is None \
                and not taken.warnings:
            self.pending.lines = lines
            return []
        try:
            with store.transaction():
                if write is not None:
                    write()
                store.save_states(taken.dirty, now)
                store.save_vhost_states(vhost_states, now)
                tell(self.store_listeners, taken.changes)
                tell(self.warning_store_listeners, taken.warnings)
        except Exception:
            # Nothing was committed (the disk is full?): keep it all for the next commit,
            # so no transition is lost to webhooks, streams or the counters.
            p = self.pending
            self.pending = Pending({**taken.dirty, **p.dirty}, taken.changes + p.changes,
                                   taken.bumped | p.bumped, lines + p.lines,
                                   taken.warnings + p.warnings)
            broker_wide.put_back(vhost_states)
            raise
        for line in lines:
            log.info(line)
        tell(self.listeners, taken.changes)
        tell(self.warning_listeners, taken.warnings)
        for key in taken.bumped:
            for watcher in self.version_watchers:
                watcher(key)
        return taken.changes


def tell(listeners: list[Callable[[Told], None]], changes: list[Told]) -> None:
    """Each change to each listener; a broken listener must not stop flow control."""
    for change in changes:
        for listener in listeners:
            try:
                listener(change)
            except TransactionLost:
                raise  # the whole commit is gone, not just this listener's part
            except Exception:
                log.exception("listener failed on %s", change)
