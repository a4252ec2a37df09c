"""The grant record (a SQLite file, as in production): what a restarted desk loads."""

from __future__ import annotations

from pathlib import Path

from api.store import Store
from sidecar.signals.grant_record import GrantRecord
from sidecar.signals.grants import Grant, InFlight

Q = ("/", "q")


def test_a_new_process_loads_held_grants_and_spent_credit(tmp_path: Path) -> None:
    record = GrantRecord(Store(tmp_path / "flow.db"))
    record.granted(Grant("held", "a", frozenset({Q}), 10, None, expires_at=20.0))
    record.granted(Grant("used", "b", frozenset({Q}), 10, 100, expires_at=20.0))
    record.released("used", InFlight(4, 40, 5.0, confirmed=True))
    record.granted(Grant("lapsed", "c", frozenset({Q}), 7, None, expires_at=8.0))
    record.granted(Grant("unused", "d", frozenset({Q}), 3, None, expires_at=20.0))
    record.released("unused", InFlight(0, 0, 6.0))

    ledger = GrantRecord(Store(tmp_path / "flow.db")).load(now=10.0)   # a restart at 10
    assert list(ledger.grants) == ["held"] and ledger.grants["held"].producer == "a"
    assert ledger.in_flight[Q] == (InFlight(4, 40, 5.0, confirmed=True), InFlight(7, 0, 8.0))
    record.prune(before=6.0)                                 # samples show what was sent by 6
    assert GrantRecord(Store(tmp_path / "flow.db")).load(now=10.0).in_flight[Q] == (
        InFlight(7, 0, 8.0),)
