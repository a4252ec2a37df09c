"""Who grants credit on a vhost among replicas, when a new owner may start, and what other
replicas' records make it wait for (pure: every moment is given)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sidecar.cluster.grant_owners import GrantOwnership, owner_of, replica_id
from sidecar.cluster.shared_view import Credit, Replica, credit_parameter, parse

DEAD, SPENDABLE = 2.0, 5.0


def replica(port: int, incarnation: str = "i1") -> GrantOwnership:
    return GrantOwnership(f"http://127.0.0.1:{port}", dead_after=DEAD, spendable=SPENDABLE,
                          incarnation=incarnation)


def beats(*owners: GrantOwnership, at: float) -> dict[str, Replica]:
    """What a read at `at` sees when these replicas wrote their heartbeats just before."""
    return parse(dict(o.heartbeat(at) for o in owners)).replicas


def rounds(*owners: GrantOwnership, start: float, polls: int, every: float = 0.5) -> float:
    """`polls` poll cycles of every replica: all heartbeats, then every read; the end."""
    at = start
    for _ in range(polls):
        seen = beats(*owners, at=at)
        for o in owners:
            o.observe(seen, {}, at)
        at += every
    return at


def owned_by(target: GrantOwnership, *others: GrantOwnership) -> str:
    """A vhost that `target` owns among these replicas."""
    members = {o.id: 0 for o in (target, *others)}
    return next(v for v in map(str, range(100)) if owner_of(v, members) == target.id)


def test_replicas_that_see_the_same_members_agree_on_every_owner() -> None:
    a, b = replica(1), replica(2)
    rounds(a, b, start=0.0, polls=2)
    for vhost in ("/", "orders", "é/x", *map(str, range(50))):
        owners = {o.id for o in (a, b) if o.route(vhost) is None}
        assert len(owners) == 1, vhost                  # exactly one answers, the other forwards
    assert {owner_of(str(v), a.members) for v in range(50)} == {a.id, b.id}  # spread
    assert replica_id("http://127.0.0.1:1") == a.id     # the same across restarts


def test_a_fresh_deployment_grants_once_each_replica_has_seen_the_other() -> None:
    """Nothing granted anywhere: no wait for a lease, only for the members to agree."""
    a, b = replica(1), replica(2)
    va, vb = owned_by(a, b), owned_by(b, a)
    end = rounds(a, b, start=0.0, polls=1)               # each sees the other; neither is seen
    assert "once replica http://127.0.0.1:2 has seen it" in str(a.refusal(va, end))
    assert "once replica http://127.0.0.1:1 has seen it" in str(b.refusal(vb, end))
    end = rounds(a, b, start=end, polls=1)               # heartbeats that list each other
    assert a.refusal(va, end) is None and b.refusal(vb, end) is None
    assert a.foreign_until(va) is None                   # no record anywhere: nothing to wait for
    assert "another replica" in str(a.refusal(vb, end))


def test_an_owner_still_unseen_by_a_live_replica_does_not_grant() -> None:
    """b joins; a owned everything and may grant until it has applied a view with b; b
    owns `vb` only once a's heartbeat lists it, written after a stopped granting there."""
    a, b = replica(1), replica(2)
    vb = owned_by(b, a)
    end = rounds(a, start=0.0, polls=2)
    assert a.refusal(vb, end) is None                    # alone: a grants everywhere
    b.observe(beats(a, b, at=end), {}, end)              # b's first read: a lists only itself
    assert "has seen it" in str(b.refusal(vb, end))
    a.observe(beats(a, b, at=end + 0.1), {}, end + 0.1)  # a sees b: stops granting on vb
    assert "another replica" in str(a.refusal(vb, end + 0.1))
    b.observe(beats(a, b, at=end + 0.2), {}, end + 0.2)  # a's heartbeat now lists b
    assert b.refusal(vb, end + 0.2) is None


def test_a_dead_owners_vhosts_move_after_its_heartbeat_ages_without_a_lease_wait() -> None:
    a, b = replica(1), replica(2)
    vb = owned_by(b, a)
    end = rounds(a, b, start=0.0, polls=2)
    assert a.route(vb) == b.url
    last_b = b.heartbeat(end)                            # b's last words, then kill -9
    a.observe({**beats(a, at=end + DEAD - 0.1), **parse(dict([last_b])).replicas}, {},
              end + DEAD - 0.1)
    assert a.route(vb) == b.url                          # b is not late enough to be dead
    a.observe({**beats(a, at=end + DEAD), **parse(dict([last_b])).replicas}, {}, end + DEAD)
    assert a.route(vb) is None and a.refusal(vb, end + DEAD) is None  # at once: b's gate shut


@pytest.mark.parametrize(("records", "vhost", "until"), [
    ({}, "/", None),                                       # nothing recorded: nothing to wait
    ({"b": Credit("i9", {"/": 12.0, "x": 30.0})}, "/", 12.0),
    ({"b": Credit("i9", {"x": 30.0})}, "/", None),         # another vhost's credit
    ({"b": Credit("i9", {"/": 12.0}), "c": Credit("i3", {"/": 15.0})}, "/", 15.0),
    ({"self": Credit("i1", {"/": 50.0})}, "/", None),      # this process's own: in its ledger
    ({"self": Credit("i0", {"/": 50.0})}, "/", 50.0),      # a former process's: not in it
])
def test_foreign_credit_is_what_other_replicas_and_former_processes_recorded(
        records: Mapping[str, Credit], vhost: str, until: float | None) -> None:
    a = replica(1, incarnation="i1")
    named = {a.id if rid == "self" else rid: c for rid, c in records.items()}
    view = parse(dict(credit_parameter(rid, c) for rid, c in named.items()))
    a.observe(beats(a, at=10.0), view.credit, 10.0)
    assert a.foreign_until(vhost) == until


def test_a_former_process_of_this_replica_stays_foreign_after_this_one_writes() -> None:
    a = replica(1, incarnation="i1")
    a.observe(beats(a, at=10.0), {a.id: Credit("i0", {"/": 50.0})}, 10.0)
    a.observe(beats(a, at=11.0), {a.id: Credit("i1", {"/": 50.0, "x": 12.0})}, 11.0)
    assert a.inherited == {"/": 50.0}
    assert a.foreign_until("/") == 50.0 and a.foreign_until("x") is None


def test_an_older_sidecar_is_never_taken_as_having_seen_anyone() -> None:
    """Its heartbeat has no `seen`: while it lives, nothing it might own is taken over; once
    dead, its credit counts as spendable for its own rule's wait."""
    a, old = replica(1), Replica("http://127.0.0.1:9", 10.0)
    a.observe({**beats(a, at=10.0), "old": old}, {}, 10.0)
    mine = next(v for v in map(str, range(100)) if owner_of(v, a.members) == a.id)
    assert "older flow-sidecar" in str(a.refusal(mine, 10.0))
    a.observe({**beats(a, at=20.0), "old": old}, {}, 20.0)
    assert a.refusal(mine, 20.0) is None
    assert a.foreign_until(mine) == 10.0 + DEAD + SPENDABLE


@pytest.mark.parametrize(("listed_at", "now", "refused"), [
    (9.0, 10.5, False),
    (9.0, 9.0 + DEAD, True),            # b may take a for dead now: a stops first
    (None, 10.5, True),                 # b has not seen a: a owns nothing yet
])
def test_a_replica_grants_only_while_every_live_one_has_seen_it_lately(
        listed_at: float | None, now: float, refused: bool) -> None:
    a, b = replica(1), replica(2)
    seen = {} if listed_at is None else {a.id: listed_at}
    a.observe({**beats(a, at=10.0), b.id: Replica(b.url, 10.0, seen)}, {}, 10.0)
    mine = owned_by(a, b)
    assert (a.refusal(mine, now) is not None) == refused


def test_a_replica_that_cannot_read_the_members_stops_granting() -> None:
    a = replica(1)
    assert a.refusal("/", 0.0) is not None              # before its first read
    rounds(a, start=0.0, polls=2)
    assert a.refusal("/", 0.5) is None
    assert "not seen the other replicas" in str(a.refusal("/", 0.5 + DEAD))


def test_an_older_answer_never_moves_a_heartbeat_back() -> None:
    """Reads may go through another node that is behind: a replica once seen at 9.0 is not
    taken for dead on an older answer, and is listed with the newest `at`."""
    a, b = replica(1), replica(2)
    a.observe({**beats(a, at=9.0), b.id: Replica(b.url, 9.0, {})}, {}, 9.0)
    a.observe({**beats(a, at=10.0), b.id: Replica(b.url, 7.0, {})}, {}, 10.0)
    assert a.heartbeat(10.5)[1]["seen"] == {b.id: 9.0}
