"""One credit ledger per vhost across replicas (`--shared-state broker`): who grants.

Each replica keeps its grant ledger in memory, so two replicas granting on one queue would
each promise the same headroom. Instead every vhost's credit has one owner among the live
replicas, chosen by rendezvous hashing (the replica whose digest of (id, vhost) is
highest), so all replicas agree on it without talking once they see the same members, and
a replica's loss moves only the vhosts it owned. The others forward grant requests for that
vhost to the owner over HTTP (`api.grant_forwarding`). Exchange grants reach queues of one
vhost only, so one ledger sees all of a grant.

Membership: each replica writes a heartbeat, `flow-sidecar.replica.<digest of its URL>`
= {"url", "at", "seen"}, every poll, just before it reads the shared state
(`SharedSync.read`), and counts as live while its `at` is less than `dead_after` older than
the start of a read. `seen` lists the replicas its last applied read counted as live, each
with the `at` it had seen of it. Its view is only as fresh as that read, so:

- a replica grants only while its last heartbeat-and-read started less than `dead_after`
  ago, and while every live replica has seen one of its heartbeats less than `dead_after`
  old (the one each lists): none of them can take it for dead meanwhile;
- a replica that owns a vhost by its view grants there only once every replica it counts
  as live lists it in `seen`: each of them has then applied a view in which it does not
  own that vhost, and stopped granting there before that heartbeat. Replicas it counts as
  dead stopped granting when their heartbeat aged past `dead_after` (their own first rule).

What they granted before is in their credit records (`flow-sidecar.credit.<id>`,
`sidecar.cluster.credit_record`): every grant is covered there, acknowledged by the broker,
before it is answered, and a grant whose record came back after the replica stopped owning
the vhost is not answered. A record written before a heartbeat is in every read that
shows the heartbeat, and a dead replica's last record came before its end, so the read
that proves a takeover shows every grant the former owner made: the new owner grants on
a queue once its depth sample describes a moment after those grants' `until`
(`foreign_until`). With nothing outstanding that is at once, a poll or two after the
members agree; with credit outstanding, when depth shows it. A replica too old to write
`seen` is never taken as having seen anyone, and its credit is taken as spendable until
its heartbeat + `dead_after` + `spendable` (its own rule's wait).

The rule assumes the replicas' clocks agree to well under `dead_after` (NTP), and that a
read through a node shows what was acknowledged before the reader's own heartbeat write
through that node returned (RabbitMQ 3.x's Mnesia: every write; 4.x's Khepri: the node
applies the log up to a write before answering it).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping
from typing import Any

from sidecar.cluster.shared_view import REPLICA, Credit, Replica


def replica_id(url: str) -> str:
    """A fixed-length id for a replica, the same across its restarts (its URL's digest):
    the broker keeps every parameter name as an atom, so names must not grow per start."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def owner_of(vhost: str, members: Mapping[str, Replica]) -> str | None:
    """The member that grants credit on `vhost` (rendezvous hashing), None without any."""
    return max(members, default=None,
               key=lambda rid: hashlib.sha256(f"{rid}\0{vhost}".encode()).digest())


class GrantOwnership:
    """This replica's view of who owns which vhost's credit, whether it may grant, and
    what credit other replicas may still spend (pure: every moment is given)."""

    def __init__(self, url: str, *, dead_after: float, spendable: float,
                 incarnation: str | None = None) -> None:
        """`spendable`: how long after it is made a grant may still be spent
        (`--grant-lease-max`), for replicas too old to keep a credit record."""
        self.url = url
        self.id = replica_id(url)
        self.incarnation = incarnation or secrets.token_hex(8)
        self.dead_after = dead_after
        self.spendable = spendable
        self.members: dict[str, Replica] = {}  # live at the last read, this one included
        self.viewed_at: float | None = None  # start of the last heartbeat-and-read
        self.inherited: dict[str, float] = {}  # this id's record from an earlier process
        self._latest: dict[str, float] = {}  # the newest `at` read of each replica
        self._foreign: dict[str, float] = {}  # vhost: other replicas' credit spent by then
        self._legacy_until = -math.inf  # older replicas' credit, on any vhost

    def heartbeat(self, now: float) -> tuple[str, Any]:
        """(name, value) of the global parameter that says this replica is live at `now`,
        and which replicas it counts as live."""
        seen = {rid: r.at for rid, r in self.members.items() if rid != self.id}
        return REPLICA + self.id, {"url": self.url, "at": now, "seen": seen}

    def observe(self, replicas: Mapping[str, Replica], credit: Mapping[str, Credit],
                started: float) -> None:
        """A heartbeat-and-read that started at `started` saw `replicas` and `credit`."""
        for rid, r in replicas.items():  # another node's answer may be older: never go back
            self._latest[rid] = max(self._latest.get(rid, -math.inf), r.at)
        live = {rid: Replica(r.url, self._latest[rid], r.seen) for rid, r in replicas.items()
                if rid != self.id and started - self._latest[rid] < self.dead_after}
        live[self.id] = Replica(self.url, started, None)
        own = credit.get(self.id)
        if self.viewed_at is None and own is not None and own.incarnation != self.incarnation:
            self.inherited = dict(own.until)  # a former process's grants: not in this ledger
        records = [c.until for rid, c in credit.items()
                   if rid != self.id or c.incarnation != self.incarnation]
        self._foreign = {}
        for until in [*records, self.inherited]:
            for vhost, moment in until.items():
                self._foreign[vhost] = max(self._foreign.get(vhost, -math.inf), moment)
        self._legacy_until = max([r.at + self.dead_after + self.spendable
                                  for rid, r in replicas.items()
                                  if r.seen is None and rid != self.id], default=-math.inf)
        self.members, self.viewed_at = live, started

    def route(self, vhost: str) -> str | None:
        """The URL of the replica to forward requests for `vhost`'s credit to; None: this
        one answers them."""
        owner = owner_of(vhost, self.members)
        return None if owner is None or owner == self.id else self.members[owner].url

    def url_of(self, rid: str) -> str | None:
        """A live other replica's URL by its id (grant ids start with their maker's)."""
        member = self.members.get(rid)
        return None if member is None or rid == self.id else member.url

    def refusal(self, vhost: str, now: float) -> str | None:
        """Why this replica may not grant on `vhost` now, or None."""
        if self.viewed_at is None:
            return "this replica has not read the shared state yet"
        others = [r for rid, r in self.members.items() if rid != self.id]
        listed = [r.seen[self.id] for r in others if r.seen and self.id in r.seen]
        if now - min([self.viewed_at, *listed]) >= self.dead_after:
            return "this replica has not seen the other replicas lately (shared state)"
        if owner_of(vhost, self.members) != self.id:
            return f"another replica grants credit on vhost {vhost!r}: ask it"
        for r in others:
            if r.seen is None:
                return (f"replica {r.url} runs an older flow-sidecar that does not say which "
                        f"replicas it has seen: vhost {vhost!r}'s credit waits until it is "
                        f"upgraded or gone")
            if self.id not in r.seen:
                return (f"this replica took over vhost {vhost!r}'s credit; it grants once "
                        f"replica {r.url} has seen it (a poll or two)")
        return None

    def foreign_until(self, vhost: str) -> float | None:
        """The moment by which every grant other replicas (or this one's former process)
        made on `vhost` is spent, as their records say; None: none that matters."""
        until = max(self._foreign.get(vhost, -math.inf), self._legacy_until)
        return None if until == -math.inf else until
