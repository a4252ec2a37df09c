"""Who grants credit on a vhost among replicas, and when a new owner may start (pure)."""

from __future__ import annotations

from sidecar.cluster.grant_owners import GrantOwnership, owner_of, replica_id
from sidecar.cluster.shared_view import Replica, parse

DEAD, SPENDABLE = 2.0, 5.0   # quarantine: 2 + 5


def replica(port: int) -> GrantOwnership:
    return GrantOwnership(f"http://127.0.0.1:{port}", dead_after=DEAD, spendable=SPENDABLE)


def beats(*owners: GrantOwnership, at: float) -> dict[str, Replica]:
    """What a read at `at` sees when these replicas wrote their heartbeats just before."""
    return parse(dict(o.heartbeat(at) for o in owners)).replicas


def test_replicas_that_see_the_same_members_agree_on_every_owner() -> None:
    a, b = replica(1), replica(2)
    for o in (a, b):
        o.observe(beats(a, b, at=0.0), 0.0)
    for vhost in ("/", "orders", "é/x", *map(str, range(50))):
        owners = {o.id for o in (a, b) if o.route(vhost) is None}
        assert len(owners) == 1, vhost                  # exactly one answers, the other forwards
    assert {owner_of(str(v), a.members) for v in range(50)} == {a.id, b.id}  # spread
    assert replica_id("http://127.0.0.1:1") == a.id     # the same across restarts


def test_a_new_owner_grants_only_once_earlier_grants_cannot_be_spent() -> None:
    a, b = replica(1), replica(2)
    a.observe(beats(a, at=0.0), 0.0)
    assert a.refusal("/", 1.0) and "took over" in str(a.refusal("/", 1.0))
    a.observe(beats(a, at=6.0), 6.0)
    assert a.refusal("/", DEAD + SPENDABLE) is None     # alone: owns every vhost
    vhost = next(v for v in map(str, range(100)) if owner_of(v, {a.id: 0, b.id: 0}) == b.id)
    a.observe(beats(a, at=9.5), 9.5)
    assert a.refusal(vhost, 10.0) is None
    b.observe(beats(a, b, at=10.0), 10.0)               # b joins: it owns `vhost`
    a.observe(beats(a, b, at=10.5), 10.5)               # a sees it: a stops granting there
    assert "another replica" in str(a.refusal(vhost, 10.5))
    assert a.route(vhost) == b.url
    b.observe(beats(a, b, at=16.5), 16.5)
    assert "took over" in str(b.refusal(vhost, 10.0 + DEAD + SPENDABLE - 0.1))
    assert b.refusal(vhost, 10.0 + DEAD + SPENDABLE) is None


def test_a_replica_that_cannot_read_the_members_stops_granting() -> None:
    a = replica(1)
    assert a.refusal("/", 0.0) is not None              # before its first read
    a.observe(beats(a, at=0.0), 0.0)
    a.observe(beats(a, at=10.0), 10.0)
    assert a.refusal("/", 10.0) is None
    assert "not seen the other replicas" in str(a.refusal("/", 10.0 + DEAD))


def test_a_dead_owners_vhosts_move_after_its_heartbeat_ages() -> None:
    a, b = replica(1), replica(2)
    vhost = next(v for v in map(str, range(100)) if owner_of(v, {a.id: 0, b.id: 0}) == b.id)
    a.observe(beats(a, b, at=0.0), 0.0)
    assert a.route(vhost) == b.url
    a.observe({**beats(a, at=DEAD - 0.1), b.id: Replica(b.url, 0.0)}, DEAD - 0.1)
    assert a.route(vhost) == b.url                      # b is not late enough to be dead
    a.observe({**beats(a, at=DEAD), b.id: Replica(b.url, 0.0)}, DEAD)
    assert a.route(vhost) is None                       # a owns it, after a quarantine
    a.observe({**beats(a, at=10.0), b.id: Replica(b.url, 0.0)}, 10.0)
    assert a.refusal(vhost, DEAD + DEAD + SPENDABLE - 0.1) is not None
    assert a.refusal(vhost, DEAD + DEAD + SPENDABLE) is None
