"""Each queue's count of warning episodes in SQLite, so that a restarted sidecar (even after
`kill -9`) numbers the next episode after the last one it had, not from 1 again
(`fill_rate.numbered`; docs/graded-flow.md)."""

from __future__ import annotations

from sidecar.flow.engine import FlowEngine
from sidecar.flow.fill_rate import WarningKind
from sidecar.flow.forecast import WarningNote
from sidecar.flow.persistence import Transactional
from sidecar.model import QueueKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS warning_episode (
    vhost TEXT NOT NULL, queue TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (vhost, queue)
)
"""


def record_episodes(engine: FlowEngine, store: Transactional) -> WarningEpisodes:
    """Keep the engine's warning episode counts in `store`, and number after them."""
    episodes = WarningEpisodes(store)
    engine.figures.restored = episodes.count
    engine.journal.warning_store_listeners.append(episodes.on_warning)
    return episodes


class WarningEpisodes:
    """The counts, loaded once and kept in memory; written with each episode's start."""

    def __init__(self, store: Transactional) -> None:
        self.store = store
        with store.transaction() as db:
            db.execute(SCHEMA)
            rows = db.execute("SELECT vhost, queue, count FROM warning_episode").fetchall()
        self._counts: dict[QueueKey, int] = {(vhost, queue): count
                                             for vhost, queue, count in rows}

    def total(self) -> int:
        """The episodes of every queue recorded, deleted ones included: it never falls
        (`flow_sidecar_warnings_total`), not even across a restart."""
        return sum(self._counts.values())

    def count(self, key: QueueKey) -> int:
        """The episodes the queue has had, as far as this sidecar recorded (0: none)."""
        return self._counts.get(key, 0)

    def on_warning(self, note: WarningNote) -> None:
        """Warning store listener: a start recorded in the transaction that commits it. Always
        written (a commit that failed is told again, and must write then)."""
        if note.event.kind is not WarningKind.STARTED:
            return
        with self.store.transaction() as db:
            db.execute("INSERT INTO warning_episode VALUES (?, ?, ?) ON CONFLICT (vhost, queue)"
                       " DO UPDATE SET count = max(count, excluded.count)",
                       (*note.key, note.event.episode))
        self._counts[note.key] = max(self.count(note.key), note.event.episode)
