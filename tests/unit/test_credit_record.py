"""A replica's credit record: written, and acknowledged, before a grant is answered; a grant
whose record came back after the replica stopped owning the vhost is not answered; brought
down once nothing is held (a fake broker: the rule, not the HTTP)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sidecar.broker import BrokerError
from sidecar.cluster.credit_record import CreditRecord
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.shared_view import CREDIT, Credit, parse
from sidecar.signals.grant_desk import GrantDesk
from sidecar.signals.grants import Grant
from tests.unit.test_grant_owners import beats, owned_by, replica
from tests.unit.test_live_depth import COUNT_ONLY, KEY, engine_at, stats

AHEAD = 1.0


class Params:
    """The global parameters, in memory; `fail` makes puts fail, `during` runs in a put."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.fail = False
        self.during: list[Any] = []

    def put(self, name: str, value: Any) -> None:
        for call in self.during:
            call()
        if self.fail:
            raise BrokerError("no node answers")
        self.values[name] = value


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def made(vhost: str, expires_at: float, gid: str = "g") -> Grant:
    return Grant(gid, "p", frozenset({(vhost, "q")}), 10, None, expires_at)


def setup(now: float = 10.0) -> tuple[CreditRecord, GrantOwnership, Params, Clock]:
    owners, params, clock = replica(1), Params(), Clock(now)
    owners.observe(beats(owners, at=now), {}, now)
    return CreditRecord(params, owners, ahead=AHEAD, clock=clock), owners, params, clock


def recorded(params: Params, owners: GrantOwnership) -> Credit:
    return parse({CREDIT + owners.id: params.values[CREDIT + owners.id]}).credit[owners.id]


def test_a_grant_is_recorded_before_it_is_answered_and_one_write_covers_the_next() -> None:
    record, owners, params, _ = setup()
    assert asyncio.run(record.cover(made("/", 13.0))) is None
    assert recorded(params, owners) == Credit(owners.incarnation, {"/": 13.0 + AHEAD})
    assert asyncio.run(record.cover(made("/", 13.5, "g2"))) is None
    assert record.writes == 1                            # within what the record says already
    assert asyncio.run(record.cover(made("/", 14.5, "g3"))) is None
    assert record.writes == 2 and record.until == {"/": 14.5 + AHEAD}


def test_a_grant_the_record_cannot_take_is_not_answered() -> None:
    record, _, params, _ = setup()
    params.fail = True
    assert "could not be written" in str(asyncio.run(record.cover(made("/", 13.0))))
    assert record.until == {}


def test_a_grant_whose_record_came_back_after_a_takeover_is_not_answered() -> None:
    """While the write is on its way, this replica reads a view where another one owns the
    vhost: the grant is recorded (more cautious) but not answered."""
    record, owners, params, clock = setup()
    other = replica(2)
    vhost = owned_by(other, owners)
    params.during.append(lambda: owners.observe(beats(owners, other, at=10.5), {}, 10.5))
    clock.now = 10.5
    assert "another replica" in str(asyncio.run(record.cover(made(vhost, 13.0))))
    assert recorded(params, owners).until == {vhost: 13.0 + AHEAD}


def test_an_idle_vhost_comes_down_to_when_nothing_was_held() -> None:
    record, owners, params, clock = setup()

    async def run() -> None:
        await record.cover(made("/", 13.0))
        await record.cover(made("x", 13.0, "g2"))
        clock.now = 11.0
        record.held = lambda: {"x"}
        record.on_poll([], 11.0)
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert recorded(params, owners).until == {"/": 11.0, "x": 13.0 + AHEAD}


def test_a_former_process_record_is_carried_on() -> None:
    owners, params, clock = replica(1, incarnation="new"), Params(), Clock(10.0)
    owners.observe(beats(owners, at=10.0), {owners.id: Credit("old", {"/": 40.0, "y": 5.0})},
                   10.0)
    record = CreditRecord(params, owners, ahead=AHEAD, clock=clock)
    asyncio.run(record.cover(made("/", 13.0)))
    assert recorded(params, owners) == Credit("new", {"/": 40.0, "y": 5.0})


def test_the_desk_answers_a_grant_only_once_its_record_holds_it(tmp_path: Path) -> None:
    """The desk's side: a grant the record refuses is answered as nothing, and its credit
    is free again at once; one it holds is answered."""
    engine = engine_at(tmp_path)
    engine.apply_poll([stats(0, 0, **{"qpid.flow_stop_count": 100, **COUNT_ONLY})], now=1.0)
    desk = GrantDesk(engine, lease=3.0, lease_max=30.0, clock=lambda: 5.0)
    answers = iter(["this replica took over vhost '/''s credit", None])

    async def cover(_: Grant) -> str | None:
        return next(answers)

    desk.cover = cover
    refused = asyncio.run(desk.ask_waiting("p", [KEY], 100, None, None, wait=0))
    assert refused.grant is None and "took over" in str(refused.limited_by)
    assert desk.held() == [] and desk.view(KEY)["free"] == {"messages": 100, "bytes": None}
    granted = asyncio.run(desk.ask_waiting("p", [KEY], 100, None, None, wait=0))
    assert granted.messages == 100 and desk.held() == [granted.grant]
