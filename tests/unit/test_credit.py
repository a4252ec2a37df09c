"""The publisher's credit line against a scripted sidecar (no HTTP): what it asks for, what
it spends, what it gives back, and how it behaves without grants."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from flow_sidecar_client.credit import CreditLine, grant_path
from flow_sidecar_client.credit_ledger import Access, Reply
from tests.utils.sidecar_process import eventually

PATH = "/grants/%2F/orders"


class Sidecar:
    """Answers asks with `grant(body)`; records every request."""

    def __init__(self, grant: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.grant = grant or self.everything
        self.ids = 0
        self.lock = threading.Lock()

    def everything(self, body: dict[str, Any]) -> Reply:
        self.ids += 1
        return Reply(200, {"grantId": f"g{self.ids}", "messages": body["messages"],
                           "bytes": body.get("bytes"), "leaseSeconds": 30.0})

    def __call__(self, path: str, body: dict[str, Any], timeout: float) -> Reply:
        with self.lock:
            self.requests.append((path, body))
            if path == "/grants/release":
                return Reply(200, {"released": len(body["grants"]), "notHeld": []})
            return self.grant(body)

    def asks(self) -> list[dict[str, Any]]:
        return [b for p, b in self.requests if p == PATH]

    def released(self) -> list[dict[str, Any]]:
        return [g for p, b in self.requests for g in (
            b["grants"] if p == "/grants/release" else b.get("release", []))]


@pytest.fixture
def lines() -> Any:
    made: list[CreditLine] = []

    def make(sidecar: Sidecar, capacity: int = 10, **kw: Any) -> CreditLine:
        made.append(CreditLine(sidecar, PATH, capacity, "queue 'orders'", **kw).start())
        return made[-1]

    yield make
    for line in made:
        line.close()


def take_eventually(line: CreditLine, size: int = 100) -> None:
    eventually(lambda: line.take(size), timeout=5, interval=0.01)


def test_asks_for_its_capacity_sized_by_the_message_and_keeps_the_next_grant_ready(
        lines: Any) -> None:
    sidecar = Sidecar()
    line = lines(sidecar, capacity=10, clock=lambda: 0.0)     # a slow sender: no time passes
    assert line.take(100) is False and line.starved          # nothing held yet: ask
    take_eventually(line)                                       # 9 of 10 left: ask again
    eventually(lambda: len(sidecar.asks()) == 2, timeout=5)
    assert sidecar.asks() == [{"messages": 10, "bytes": 1_000, "wait": 1.0, "release": []}] * 2
    for _ in range(9):                                          # g1 spent, g2 untouched
        assert line.take(100)
    eventually(lambda: len(sidecar.asks()) == 3, timeout=5)
    assert sidecar.asks()[2]["release"] == [
        {"grantId": "g1", "usedMessages": 10, "usedBytes": 1_000}]   # given back in it
    for _ in range(30):
        take_eventually(line)
        assert len(line._held) <= 2                             # at most two grants held


@pytest.mark.parametrize(("seconds", "asked"), [(1.0, 10), (0.05, 38), (0.001, 80)])
def test_a_fast_sender_asks_for_its_rate_times_size_for_at_most_span_max_capacities(
        lines: Any, seconds: float, asked: int) -> None:
    sidecar, now = Sidecar(), [0.0]
    line = lines(sidecar, capacity=10, clock=lambda: now[0])
    take_eventually(line)
    eventually(lambda: len(sidecar.asks()) == 2, timeout=5)   # the next grant, in hand
    for _ in range(19):                                         # g1 and g2 spent...
        assert line.take(100)
    now[0] += seconds                                           # ...in this long
    take_eventually(line)
    eventually(lambda: len(sidecar.asks()) >= 3, timeout=5)
    # 19 messages since the last ask: SIZE_FOR (0.1 s) of that rate, capacity at least,
    # SPAN_MAX (8) capacities at most
    assert sidecar.asks()[2]["messages"] == asked
    assert sidecar.asks()[2]["bytes"] == asked * 100


def test_a_message_larger_than_the_byte_credit_waits_for_a_bigger_grant(lines: Any) -> None:
    def small_first(body: dict[str, Any]) -> Reply:
        return Sidecar.everything(sidecar, {**body, "bytes": body.get("bytes", 40)})

    sidecar = Sidecar(small_first)
    line = lines(sidecar, capacity=4)
    take_eventually(line, 10)                                   # grants of 40 bytes
    eventually(lambda: len(line._held) == 2, timeout=5)
    assert line.take(500) is False                              # does not fit either
    take_eventually(line, 500)
    assert sidecar.asks()[-1] == {"messages": 4, "bytes": 2_000, "wait": 1.0, "release": [
        {"grantId": "g1", "usedMessages": 1, "usedBytes": 10},
        {"grantId": "g2", "usedMessages": 0, "usedBytes": 0}]}     # the small ones returned


def test_nothing_granted_means_no_sending_until_credit_comes(lines: Any) -> None:
    free = threading.Event()

    def stingy(body: dict[str, Any]) -> Reply:
        if not free.is_set():
            return Reply(200, {"grantId": None, "messages": 0, "bytes": 0,
                               "leaseSeconds": 0.0, "limitedBy": "queue 'orders' is flow "
                                                                 "stopped"})
        return Sidecar.everything(sidecar, body)

    sidecar = Sidecar(stingy)
    line = lines(sidecar)
    for _ in range(20):
        assert line.take(1) is False
        line.wait(0.01)
    free.set()
    take_eventually(line, 1)


def test_expired_grants_are_not_used(lines: Any) -> None:
    now = [0.0]
    sidecar = Sidecar(lambda body: Reply(200, {"grantId": "short", "messages": 5,
                                               "bytes": None, "leaseSeconds": 2.0}))
    line = lines(sidecar, clock=lambda: now[0])
    take_eventually(line)
    now[0] = 2.0 - 0.04                                         # within the use margin
    assert line.take(100) is False


def test_an_unfinished_grant_is_given_back_before_its_lease_ends(lines: Any) -> None:
    """Else the sidecar ends it first and counts all of it as used for a while."""
    sidecar = Sidecar(lambda body: Reply(200, {"grantId": "g", "messages": 5, "bytes": None,
                                               "leaseSeconds": 1.0}))
    line = lines(sidecar, capacity=5)
    take_eventually(line)
    started = time.monotonic()
    eventually(lambda: sidecar.released(), timeout=5, interval=0.01)
    assert time.monotonic() - started < 1.0 - 0.05
    assert sidecar.released()[0] == {"grantId": "g", "usedMessages": 1, "usedBytes": 100}


@pytest.mark.parametrize(("reply", "access"), [
    (Reply(404, {"detail": "Not Found"}), Access.UNSUPPORTED),       # an older sidecar
    (Reply(405, {"detail": "Method Not Allowed"}), Access.UNSUPPORTED),
    (Reply(None, None, "cannot reach flow-sidecar"), Access.UNAVAILABLE),
    (Reply(404, {"detail": "queue 'orders' in vhost '/' is not known"}), Access.UNAVAILABLE),
    (Reply(503, {"detail": "not read yet"}), Access.UNAVAILABLE),
])
@pytest.mark.parametrize("mode", ["auto", "required"])
def test_without_grants_auto_sends_as_before_and_required_holds(
        lines: Any, reply: Reply, access: Access, mode: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flow_sidecar.client")
    line = lines(Sidecar(lambda body: reply), mode=mode)
    line.take(10)
    eventually(lambda: line.access is access, timeout=5)
    assert line.take(10) is (mode == "auto")
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert len(said) == 1 and "gives queue 'orders' no credit grant" in said[0][1]
    assert ("holding messages" in said[0][1]) is (mode == "required")
    # "auto" warns through the flow watcher when the sidecar is away; not twice
    assert said[0][0] == (logging.WARNING if mode == "required" else logging.INFO
                          if access is Access.UNSUPPORTED else logging.DEBUG)


def test_off_never_asks(lines: Any) -> None:
    sidecar = Sidecar()
    line = lines(sidecar, mode="off")
    assert all(line.take(10) for _ in range(100))
    assert sidecar.requests == []


def test_close_gives_back_what_is_held_with_what_was_used(lines: Any) -> None:
    sidecar = Sidecar()
    line = lines(sidecar, capacity=10)
    take_eventually(line)
    line.take(100)
    line.close()
    assert sidecar.released() == [{"grantId": "g1", "usedMessages": 2, "usedBytes": 200}]


def test_a_spent_grant_goes_back_once_its_messages_are_confirmed_saying_so(
        lines: Any) -> None:
    """With delivery tags, a spent grant is given back only after the broker confirmed
    every message sent with it (`confirmed: true`); the sidecar frees it sooner then."""
    sidecar = Sidecar()
    line = lines(sidecar, capacity=3)
    eventually(lambda: line.take(100, 1), timeout=5, interval=0.01)
    assert line.take(100, 2) and line.take(100, 3)              # g1 spent, tags 1-3
    eventually(lambda: len(sidecar.asks()) == 2, timeout=5)     # g2 asked for, g1 kept
    line.confirmed(3)                                           # 1 and 2 confirmed
    time.sleep(0.2)
    assert sidecar.released() == []
    assert line.take(100, 4)                                    # from g2
    line.confirmed(4)                                           # 3 as well: g1 may go
    eventually(lambda: sidecar.released() == [{"grantId": "g1", "usedMessages": 3,
                                               "usedBytes": 300, "confirmed": True}],
               timeout=5)
    line.close()                                                # g2's tag 4 unconfirmed
    assert {"grantId": "g2", "usedMessages": 1, "usedBytes": 100} in sidecar.released()


def test_grant_paths_are_percent_encoded() -> None:
    assert grant_path("/", "a b/c", None) == "/grants/%2F/a%20b%2Fc"
    assert grant_path("v", None, "") == "/grants/exchange/v/amq.default"
    assert grant_path("v", None, "x/y") == "/grants/exchange/v/x%2Fy"
