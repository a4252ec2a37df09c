"""The outage policy of every publisher (flow_sidecar_client.outage), from tables: what the
sidecar last said + how long it has been away + what was sent since -> the verdict."""

from __future__ import annotations

import logging

import pytest

from flow_sidecar_client.outage import (
    Contact,
    Known,
    OutageWindow,
    Spent,
    Verdict,
    decide,
    unreachable,
)
from flow_sidecar_client.watch_state import WatchState

GO, STOP, NOTHING = Known.GO, Known.STOP, Known.NOTHING
SEND, WINDOW, GRANTED, HOLD, OPEN = (Verdict.SEND, Verdict.WINDOW, Verdict.GRANTED_ONLY,
                                     Verdict.HOLD, Verdict.OPEN)
CAPACITY, GRACE = 50, 10.0


@pytest.mark.parametrize(("known", "away_for", "unheard", "on_unreachable", "verdict"), [
    # the sidecar answers: its word
    (GO, None, 0, None, SEND), (STOP, None, 0, None, HOLD),
    (GO, None, 0, "block", SEND), (STOP, None, 0, "send", HOLD),
    # away, within the grace period: what it last said
    (STOP, 0.0, 0, None, HOLD), (STOP, 9.9, 0, None, HOLD),
    (NOTHING, 0.0, 0, None, HOLD), (NOTHING, 9.9, 0, None, HOLD),
    (GO, 0.0, 0, None, WINDOW), (GO, 5.0, 49, None, WINDOW),
    (GO, 5.0, 50, None, GRANTED), (GO, 5.0, 500, None, GRANTED),
    # the grace period over: fail open, whatever was known
    (STOP, 10.0, 0, None, OPEN), (GO, 10.0, 50, None, OPEN), (NOTHING, 60.0, 0, None, OPEN),
    # on_unreachable chosen: its meaning, from the first second
    (STOP, 0.0, 0, "send", OPEN), (GO, 0.0, 50, "send", OPEN),
    (GO, 0.0, 0, "block", HOLD), (GO, 600.0, 0, "block", HOLD),
])
def test_verdicts(known: Known, away_for: float | None, unheard: int,
                  on_unreachable: str | None, verdict: Verdict) -> None:
    now = 1000.0
    contact = Contact(known, None if away_for is None else now - away_for)
    assert decide(contact, now, unheard, CAPACITY, grace=GRACE,
                  on_unreachable=on_unreachable) is verdict  # type: ignore[arg-type]


@pytest.mark.parametrize(("on_unreachable", "verdict"),
                         [(None, OPEN), ("send", OPEN), ("block", HOLD)])
def test_a_destination_the_sidecar_does_not_know_is_no_outage(
        on_unreachable: str | None, verdict: Verdict) -> None:
    contact = Contact(NOTHING, 0.0, refused=True)
    assert decide(contact, 0.0, 0, CAPACITY, on_unreachable=on_unreachable) is verdict  # type: ignore[arg-type]


@pytest.mark.parametrize(("status", "away"), [
    (None, True), (500, True), (502, True), (503, True), (504, True),
    (400, False), (401, False), (404, False), (422, False)])
def test_what_counts_as_away(status: int | None, away: bool) -> None:
    assert unreachable(status) is away


@pytest.mark.parametrize(("verdict", "spent", "goes"), [
    (SEND, Spent.GRANT, True), (SEND, Spent.FREE, True), (SEND, Spent.NONE, False),
    (SEND, Spent.AWAY, False),   # the watch hears it, the grants did not yet: wait for them
    (WINDOW, Spent.GRANT, True), (WINDOW, Spent.AWAY, True), (WINDOW, Spent.FREE, True),
    (WINDOW, Spent.NONE, False),
    (GRANTED, Spent.GRANT, True), (GRANTED, Spent.AWAY, False), (GRANTED, Spent.FREE, False),
    (OPEN, Spent.FREE, True), (OPEN, Spent.AWAY, True), (OPEN, Spent.NONE, False),
    (HOLD, Spent.GRANT, False), (HOLD, Spent.FREE, False),
])
def test_what_goes(verdict: Verdict, spent: Spent, goes: bool) -> None:
    assert OutageWindow.allows(verdict, spent) is goes


def test_the_window_counts_what_went_without_a_grant_and_starts_again_per_outage() -> None:
    window = OutageWindow(3, grace=GRACE)
    away = Contact(GO, 100.0)
    for spent in (Spent.AWAY, Spent.GRANT, Spent.AWAY, Spent.GRANT, Spent.AWAY):
        assert window.verdict(away, 101.0) is WINDOW
        window.sent(WINDOW, spent)
    assert window.verdict(away, 101.0) is GRANTED                 # 3 without a grant
    assert window.verdict(Contact(GO), 102.0) is SEND             # heard again
    assert window.verdict(Contact(GO, 103.0), 103.0) is WINDOW    # a new outage, a new window
    assert window.verdict(Contact(GO, 103.0), 113.0) is OPEN      # and its grace period


def test_a_negative_grace_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unreachable_grace"):
        OutageWindow(3, grace=-1)


def test_a_watch_says_an_outage_once_and_fails_open_once(
        caplog: pytest.LogCaptureFixture) -> None:
    state = WatchState("queue 'q'", grace=10)
    caplog.set_level(logging.INFO, logger="flow_sidecar.client")
    state.answered({"flowStopped": True, "version": 3}, 0.0)
    state.failed("cannot reach flow-sidecar at http://127.0.0.1:1: ConnectError", None, 1.0)
    state.failed("GET /flow/%2F/q: 503: not read yet", 503, 2.0)   # the same outage
    assert state.contact() == Contact(STOP, 1.0)
    state.opened()
    state.opened()
    state.answered({"flowStopped": False, "version": 4}, 12.0)
    assert state.contact() == Contact(GO)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", ("flow-sidecar gives no flow state for queue 'q' (cannot reach flow-sidecar "
                  "at http://127.0.0.1:1: ConnectError); obeying what it last said (stopped) "
                  "for up to 10s")),
        ("WARNING", ("flow-sidecar has given no flow state for queue 'q' for 10s (cannot "
                     "reach flow-sidecar at http://127.0.0.1:1: ConnectError); sending "
                     "without flow control until it answers")),
        ("INFO", "flow-sidecar answers again for queue 'q'; obeying flow control"),
    ]


def test_a_refusal_is_not_an_outage_and_keeps_the_old_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    state = WatchState("queue 'q'")
    caplog.set_level(logging.INFO, logger="flow_sidecar.client")
    state.failed("GET /flow/%2F/q: 404: queue 'q' in vhost '/' is not known", 404, 0.0)
    state.opened()  # said already
    assert state.contact().refused
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "sending without flow control until it answers" in caplog.records[0].getMessage()
