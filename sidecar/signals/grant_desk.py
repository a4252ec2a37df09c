"""The grant desk: the one credit ledger of a running sidecar, and waiting for credit.

The stateful shell around `sidecar.signals.grants`. It keeps the ledger in memory on the
event loop (every call comes from the loop: no locks), reads each destination's depth,
thresholds and state from the flow engine, expires leases and settles in-flight credit
after every poll, and wakes requests that wait for credit.

Every grant is recorded in the settings database before it is answered, and every release
after it is applied (`sidecar.signals.grant_record`); a restarted sidecar starts from that
record, so grants still being spent, and spent credit its first samples cannot show yet,
are not granted again. A grant the database cannot take is not made. With replicas, a grant
is also covered by this replica's record in the broker (`cover`) before it is answered,
and one the record cannot cover is given back unanswered.

A sample read at time T describes the broker at some moment after T less the engine's
statistics lag (`FlowEngine.statistics_lag`: the larger of `--broker-stats-lag` and the lag
it measures), so that is the `as_of` the ledger settles against.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from sidecar.flow.engine import FlowEngine
from sidecar.flow.producer_classes import grant_view
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Thresholds
from sidecar.model import QueueKey
from sidecar.signals.grant_record import GrantRecord, shown_before
from sidecar.signals.grants import (
    Ask,
    Decision,
    Destination,
    Grant,
    Ledger,
    Outstanding,
    active_producers,
    expire,
    foreign_release,
    grant,
    message_evidence,
    missing_bytes,
    note_ask,
    outstanding,
    release,
    release_problem,
    settle,
    spent,
)

log = logging.getLogger("flow_sidecar.grants")
ANONYMOUS = "-"  # producers that do not say who they are share one fair share


@dataclass(frozen=True)
class Release:
    """A holder ends a grant, saying how much of it it used (None: all of it), and whether
    the broker confirmed every message it sent with it."""

    grant_id: str
    used_messages: int | None = None
    used_bytes: int | None = None
    confirmed: bool = False


class GrantDesk:
    """Hands out and takes back credit; see the module docstring."""

    def __init__(self, engine: FlowEngine, *, lease: float,
                 lease_max: float, record: GrantRecord | None = None,
                 clock: Callable[[], float] = time.time,
                 new_id: Callable[[], str] = lambda: secrets.token_urlsafe(12)) -> None:
        self.engine = engine
        self.lease = lease
        self.lease_max = lease_max
        self.record = record
        self.clock = clock
        self.new_id = new_id
        self.ledger = Ledger() if record is None else record.load(clock())
        # with replicas (sidecar.cluster.grant_owners): why a vhost's credit may not be
        # granted here now, and the maker's id that starts every grant id
        self.gate: Callable[[str, float], str | None] | None = None
        self.id_prefix = ""
        # ... the moment by which other replicas' credit on a vhost is spent, and the
        # record that must cover a grant before it is answered (why not, or None)
        self.foreign_until: Callable[[str], float | None] | None = None
        self.cover: Callable[[Grant], Awaitable[str | None]] | None = None
        # called after a release of credit the broker confirmed: a live sample read after
        # it settles that credit (the live sampler's `hurry`)
        self.on_confirmed: Callable[[], None] | None = None
        # told of each grant answered, and when (who filled a queue: records.filled_by)
        self.on_granted: Callable[[Grant, float], None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        # for /metrics: requests answered, those answered with nothing, messages granted
        self.requests = 0
        self.refusals = 0
        self.messages_granted = 0

    # -- the ledger's inputs from the engine ------------------------------------------
    def destination(self, key: QueueKey, producer_class: str | None = None) -> Destination:
        """The queue as the ledger needs it; an unknown queue can be granted nothing. For a
        producer of one of its classes, with its class's thresholds and state
        (`producer_classes.grant_view`): the headroom below its class's stop."""
        entry = self.engine.entry(key)
        if entry is None:
            return Destination(key, Thresholds(), None, None, False, known=False)
        depth, bound = entry.depth, entry.bound
        if depth is not None and bound is not None and bound.messages > depth.messages:
            # the depth shown may be an estimate below the truth (a live ready count plus
            # older unacknowledged counts): credit is granted against the upper bound
            depth = Depth(bound.messages, depth.bytes)
        foreign = None if self.foreign_until is None else self.foreign_until(key[0])
        thresholds, stopped = entry.resolution.thresholds, entry.told_stopped
        if producer_class is not None and entry.producer_classes:
            thresholds, stopped = grant_view(producer_class, thresholds, stopped,
                                             entry.producer_classes, entry.class_states)
        return Destination(key, thresholds, depth, self._as_of(entry.sampled_at), stopped,
                           bound=bound, foreign_until=foreign)

    def _as_of(self, sampled_at: float | None) -> float | None:
        """The moment a sample read at `sampled_at` is sure to describe."""
        return None if sampled_at is None else sampled_at - self.engine.statistics_lag

    # -- requests ---------------------------------------------------------------------
    def lease_for(self, asked: float | None) -> float:
        """The lease a request gets: what it asked for (else the default), at most the cap."""
        return min(asked or self.lease, self.lease_max)

    def problems(self, releases: Iterable[Release]) -> list[tuple[int, str, str]]:
        """(index, field, message) for each release that claims more than was granted."""
        self.ledger = expire(self.ledger, self.clock())
        found = []
        for i, r in enumerate(releases):
            problem = release_problem(self.ledger, r.grant_id, r.used_messages, r.used_bytes)
            if problem is not None:
                found.append((i, *problem))
        return found

    def foreign(self, releases: Iterable[Release], producer: str | None) -> str | None:
        """Why `producer` may not make these releases (one of them is another producer's
        grant), or None."""
        asker = producer or ANONYMOUS
        return next((problem for r in releases
                     if (problem := foreign_release(self.ledger, r.grant_id, asker))), None)

    def bytes_problem(self, keys: Iterable[QueueKey], nbytes: int | None) -> str | None:
        """Why an ask for `keys` must say how many bytes it will send, or None."""
        return missing_bytes(nbytes, [self.destination(k) for k in keys])

    def release(self, releases: Iterable[Release]) -> list[str]:
        """Apply releases (check `problems` first); the ids that were not held (already
        released, or expired and so taken as fully used)."""
        now = self.clock()
        self.ledger = expire(self.ledger, now)
        not_held = []
        for r in releases:
            grant_made = self.ledger.grants.get(r.grant_id)
            self.ledger, held = release(self.ledger, r.grant_id, r.used_messages,
                                        r.used_bytes, now, r.confirmed)
            if grant_made is None or not held:
                not_held.append(r.grant_id)
                continue
            self.wake()
            if r.confirmed and r.used_messages != 0 and self.on_confirmed is not None:
                self.on_confirmed()
            if self.record is not None:
                used = spent(grant_made, r.used_messages, r.used_bytes, now, r.confirmed)
                try:
                    self.record.released(r.grant_id, used)
                except sqlite3.Error as exc:  # the record keeps it held: only more cautious
                    log.warning("cannot record the release of a grant: %s", exc)
        return not_held

    def ask(self, producer: str | None, keys: Iterable[QueueKey], messages: int,
            nbytes: int | None, lease: float | None = None,
            producer_class: str | None = None) -> Decision:
        """Grant what the destinations can take now (see `grants.grant`), for a producer of
        `producer_class` what they can take below its class's stop."""
        now = self.clock()
        self.ledger = expire(self.ledger, now)
        targets = sorted(set(keys))
        gate = self.gate
        refused = next((why for v in {k[0] for k in targets}
                        if gate is not None and (why := gate(v, now))), None)
        if refused is not None:  # still one of the producers sharing the headroom
            self.ledger = note_ask(self.ledger, producer or ANONYMOUS, targets, now)
            return Decision(0, None if nbytes is None else 0, None, refused)
        decision, ledger = grant(
            self.ledger, Ask(producer or ANONYMOUS, messages, nbytes, self.lease_for(lease)),
            [self.destination(k, producer_class) for k in targets],
            self.id_prefix + self.new_id(), now,
            ask_window=self.lease)
        if decision.grant is not None and self.record is not None:
            try:
                self.record.granted(decision.grant)
            except sqlite3.Error as exc:  # unrecorded, a restart could grant it again
                log.warning("cannot record a grant, none made: %s", exc)
                return Decision(0, None if nbytes is None else 0, None,
                                f"the grant could not be recorded: {exc}")
        self.ledger = ledger
        return decision

    async def ask_waiting(self, producer: str | None, keys: Iterable[QueueKey],
                          messages: int, nbytes: int | None, lease: float | None,
                          wait: float, producer_class: str | None = None) -> Decision:
        """`ask`, and while nothing can be granted, ask again after every poll, release or
        change of a queue's state until `wait` seconds have passed (or the ask lacks its
        bytes: answered with nothing, and why)."""
        targets = list(keys)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        decision = self.ask(producer, targets, messages, nbytes, lease, producer_class)
        # a size stop may appear while it waits: then it must say its bytes, and never can
        while decision.grant is None and self.bytes_problem(targets, nbytes) is None and (
                left := deadline - loop.time()) > 0:
            await self._changed(left)
            decision = self.ask(producer, targets, messages, nbytes, lease, producer_class)
        decision = await self._covered(decision)
        self.requests += 1
        if decision.grant is None:
            self.refusals += 1
        else:
            self.messages_granted += decision.grant.messages
            if self.on_granted is not None:
                self.on_granted(decision.grant, self.clock())
        return decision

    async def _covered(self, decision: Decision) -> Decision:
        """`decision`, once `cover` recorded its grant; nothing, and why, if it did not
        (the grant was never answered: all of it returns at once)."""
        made = decision.grant
        if made is None or self.cover is None:
            return decision
        why = await self.cover(made)
        if why is None:
            return decision
        self.release([Release(made.id, 0, 0)])
        return Decision(0, None if made.bytes is None else 0, None, why)

    def held_vhosts(self) -> set[str]:
        """The vhosts where a grant is held now."""
        return {key[0] for g in self.held() for key in g.queues}

    # -- hooks ------------------------------------------------------------------------
    def on_poll(self, now: float) -> None:
        """Poller hook: end leases that are over, forget what depth now shows, and let
        waiting requests try again."""
        ledger = expire(self.ledger, now)  # may move credit in flight: settle after it
        # only queues with credit in flight need their sample's moment, not every queue
        as_of = {key: self._as_of(entry.sampled_at) for key in ledger.in_flight
                 if (entry := self.engine.entry(key)) is not None}
        self.ledger = settle(ledger, as_of, now, self.lease)
        if self.record is not None:
            try:
                self.record.prune(shown_before(now - self.engine.statistics_lag,
                                               as_of.values()))
            except sqlite3.Error as exc:  # pruned at the next poll
                log.warning("cannot prune the grant record: %s", exc)
        self.wake()

    def on_version(self, _key: QueueKey) -> None:
        """Engine version watcher: a state or threshold change may free credit."""
        self.wake()

    def wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _changed(self, timeout: float) -> None:
        """Until the next wake-up or `timeout`; every waiter shares one future."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        # asyncio.wait neither cancels the shared future nor leaves a callback on it
        await asyncio.wait({self._waiter}, timeout=timeout)

    # -- read side --------------------------------------------------------------------
    def held(self) -> list[Grant]:
        """The grants whose lease has not ended."""
        self.ledger = expire(self.ledger, self.clock())
        return list(self.ledger.grants.values())

    def outstanding_by_queue(self) -> dict[QueueKey, Outstanding]:
        """Credit beyond each queue's last depth sample (held grants and spent credit the
        sample cannot show yet), for every queue that has any."""
        self.ledger = expire(self.ledger, self.clock())
        keys = {k for g in self.ledger.grants.values() for k in g.queues}
        keys.update(k for k, flying in self.ledger.in_flight.items() if flying)
        out = {k: outstanding(self.ledger, k, self.destination(k).as_of) for k in keys}
        return {k: o for k, o in out.items() if o.messages or o.bytes}

    def view(self, key: QueueKey) -> dict[str, object]:
        """The queue's part of the ledger, for operators: what is held, what is in flight,
        how much each dimension has free."""
        now = self.clock()
        self.ledger = expire(self.ledger, now)
        d = self.destination(key)
        out = outstanding(self.ledger, key, d.as_of)
        if d.depth is not None:  # messages: from the sample or the bound, as grants see it
            messages, flying = message_evidence(self.ledger, d)
            out = Outstanding(flying, out.bytes)
            d = replace(d, depth=Depth(messages, d.depth.bytes))
        held = [g for g in self.ledger.grants.values() if key in g.queues]
        free: dict[str, int | None] = {"messages": None, "bytes": None}
        if d.depth is not None:
            for dim, level, depth, taken in (
                    ("messages", d.thresholds.count, d.depth.messages, out.messages),
                    ("bytes", d.thresholds.size, d.depth.bytes, out.bytes)):
                if level is not None and depth is not None:
                    free[dim] = max(0, level.stop - depth - taken)
        return {
            "held": {"grants": len(held), "messages": sum(g.messages for g in held),
                     "bytes": sum(g.bytes or 0 for g in held)},
            "outstanding": {"messages": out.messages, "bytes": out.bytes},
            "free": free,
            "producers": sorted(active_producers(self.ledger, key, now, self.lease)),
        }
