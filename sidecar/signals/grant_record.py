"""The durable record of credit grants: what a restarted sidecar must not grant again.

A grant's holder may spend it until its lease ends (up to `--grant-lease-max`), and spent
credit counts until a depth sample shows it. A sidecar that forgot both after a restart
would grant the same headroom twice. So every grant is written to the settings database
(SQLite, WAL) in its own transaction before it is answered, and a release notes what was
used; a new process loads the rows back into its ledger (`load`): unexpired grants as held
(their holders may even release them), the others as spent credit (expired: taken as fully
used at their end). Rows whose credit every later sample shows are pruned after each poll.

Only the grant routes write here; `/flow` never touches SQLite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from sidecar.flow.persistence import Transactional
from sidecar.signals.grants import Grant, InFlight, Ledger

SCHEMA = """
CREATE TABLE IF NOT EXISTS grant_credit (
    id TEXT PRIMARY KEY, producer TEXT NOT NULL, queues TEXT NOT NULL,
    messages INTEGER NOT NULL, bytes INTEGER, expires_at REAL NOT NULL,
    used_messages INTEGER, used_bytes INTEGER, sent_by REAL, confirmed INTEGER
)
"""


def shown_before(before: float, in_flight_as_of: Iterable[float | None]) -> float:
    """The moment before which every recorded grant's credit is shown by the samples: now
    less the statistics' lag (`before`), or earlier while a queue that still has credit in
    flight was last sampled earlier (a poll that did not read it, a data gap), or never
    (None: nothing is shown yet). Pruning by the clock alone forgot such credit, and a
    restart then granted it again (found by `tests/unit/test_grants.py`'s state machine)."""
    earliest = before
    for moment in in_flight_as_of:
        if moment is None:
            return -math.inf
        earliest = min(earliest, moment)
    return earliest


class GrantRecord:
    """The `grant_credit` table of the settings database."""

    def __init__(self, store: Transactional) -> None:
        self.store = store
        with store.transaction() as db:
            db.execute(SCHEMA)

    def granted(self, made: Grant) -> None:
        """Record a grant before it is answered (sqlite3.Error: then it must not be)."""
        with self.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO grant_credit (id, producer, queues, messages, "
                       "bytes, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                       (made.id, made.producer, json.dumps(sorted(made.queues)),
                        made.messages, made.bytes, made.expires_at))

    def released(self, grant_id: str, used: InFlight) -> None:
        """Note that a grant ended, leaving `used` in flight."""
        with self.store.transaction() as db:
            db.execute("UPDATE grant_credit SET used_messages = ?, used_bytes = ?, "
                       "sent_by = ?, confirmed = ? WHERE id = ?",
                       (used.messages, used.bytes, used.sent_by, int(used.confirmed),
                        grant_id))

    def prune(self, before: float) -> None:
        """Forget grants that ended before `before`: every sample read from then on
        describes a moment after their messages were sent."""
        with self.store.transaction() as db:
            db.execute("DELETE FROM grant_credit WHERE COALESCE(sent_by, expires_at) < ?",
                       (before,))

    def load(self, now: float) -> Ledger:
        """The ledger the recorded grants make at `now`: held grants, and spent credit the
        next samples settle as usual."""
        with self.store.transaction() as db:
            rows = db.execute("SELECT id, producer, queues, messages, bytes, expires_at, "
                              "used_messages, used_bytes, sent_by, confirmed FROM grant_credit "
                              "ORDER BY COALESCE(sent_by, expires_at)").fetchall()
        grants: dict[str, Grant] = {}
        flying: dict[tuple[str, str], tuple[InFlight, ...]] = {}
        for gid, producer, queues, messages, nbytes, expires_at, used_m, used_b, sent_by, \
                confirmed in rows:
            keys = frozenset((str(v), str(q)) for v, q in json.loads(queues))
            if sent_by is None and expires_at > now:
                grants[gid] = Grant(gid, producer, keys, messages, nbytes, expires_at)
                continue
            spent = (InFlight(messages, nbytes or 0, expires_at) if sent_by is None
                     else InFlight(used_m, used_b, sent_by, bool(confirmed)))
            if spent.messages or spent.bytes:
                for key in keys:
                    flying[key] = (*flying.get(key, ()), spent)
        return Ledger(grants=grants, in_flight=flying)
