"""One credit ledger per vhost across replicas (`--shared-state broker`): who grants.

Each replica keeps its grant ledger in memory, so two replicas granting on one queue would
each promise the same headroom. Instead every vhost's credit has one owner among the live
replicas, chosen by rendezvous hashing (the replica whose digest of (id, vhost) is
highest), so all replicas agree on it without talking once they see the same members, and
a replica's loss moves only the vhosts it owned. The others forward grant requests for that
vhost to the owner over HTTP (`api.grant_forwarding`). Exchange grants reach queues of one
vhost only, so one ledger sees all of a grant.

Membership: each replica writes a heartbeat, `flow-sidecar.replica.<digest of its URL>`
= {"url", "at"}, every poll, just before it reads the shared state (`SharedSync.read`), and
counts as live while its `at` is less than `dead_after` older than the start of a read.
Its view is only as fresh as that read, so:

- a replica grants only while its last heartbeat-and-read started less than `dead_after`
  ago: a replica that others may take for dead, or that may not have seen a newcomer
  (its read started before the newcomer's heartbeat), stops granting within `dead_after`;
- a replica that becomes a vhost's owner (at start, when a member joins or leaves) grants
  nothing there for `dead_after` + `--grant-lease-max` + `--broker-stats-lag`: the previous
  owner's last grants can then no longer be spent, and depth shows what they sent.

The rule assumes the replicas' clocks agree to well under `dead_after` (NTP).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sidecar.cluster.shared_view import REPLICA, Replica


def replica_id(url: str) -> str:
    """A fixed-length id for a replica, the same across its restarts (its URL's digest):
    the broker keeps every parameter name as an atom, so names must not grow per start."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def owner_of(vhost: str, members: Mapping[str, Replica]) -> str | None:
    """The member that grants credit on `vhost` (rendezvous hashing), None without any."""
    return max(members, default=None,
               key=lambda rid: hashlib.sha256(f"{rid}\0{vhost}".encode()).digest())


class GrantOwnership:
    """This replica's view of who owns which vhost's credit, and whether it may grant."""

    def __init__(self, url: str, *, dead_after: float, spendable: float) -> None:
        """`spendable`: how long after it is made a grant's credit may still be unseen by
        depth (`--grant-lease-max` + `--broker-stats-lag`)."""
        self.url = url
        self.id = replica_id(url)
        self.dead_after = dead_after
        self.quarantine = dead_after + spendable
        self.members: dict[str, Replica] = {}
        self.viewed_at: float | None = None  # start of the last heartbeat-and-read
        self.changed_at = 0.0  # when the members last changed (ownership may have moved)
        self._owned_since: dict[str, float] = {}

    def heartbeat(self, now: float) -> tuple[str, Any]:
        """(name, value) of the global parameter that says this replica is live at `now`."""
        return REPLICA + self.id, {"url": self.url, "at": now}

    def observe(self, replicas: Mapping[str, Replica], started: float) -> None:
        """A heartbeat-and-read that started at `started` saw `replicas`."""
        live = {rid: r for rid, r in replicas.items() if started - r.at < self.dead_after}
        live[self.id] = Replica(self.url, started)
        if live.keys() != self.members.keys() or self.viewed_at is None:
            self.changed_at = started
            self._owned_since = {v: since for v, since in self._owned_since.items()
                                 if owner_of(v, live) == self.id}
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
        if self.viewed_at is None or now - self.viewed_at >= self.dead_after:
            return "this replica has not seen the other replicas lately (shared state)"
        if owner_of(vhost, self.members) != self.id:
            return f"another replica grants credit on vhost {vhost!r}: ask it"
        since = self._owned_since.setdefault(vhost, self.changed_at)
        if now < since + self.quarantine:
            return (f"this replica took over vhost {vhost!r}'s credit {now - since:.1f} s "
                    f"ago; it grants after {self.quarantine:.1f} s, when no earlier grant "
                    f"can still be spent")
        return None
