"""A replica's credit record in the broker: until when the grants it answered may be spent.

`flow-sidecar.credit.<replica id>` = {"incarnation", "until": {vhost: moment}}: every grant
this replica answered on a vhost is spent by that vhost's moment (its lease ends by then,
or it was given back). A replica taking over the vhost reads it and grants on a queue once
the queue's depth describes a later moment (`sidecar.cluster.grant_owners`), instead of
waiting for the longest lease after every change of owner.

So the record must hold every grant before its holder hears of it: `cover` raises the
vhost's moment past the grant's lease end, and waits for the broker to acknowledge the
write, before the grant is answered; then it asks the owners' rule again, so a grant whose
write came back after this replica stopped owning the vhost, or stopped being sure of its
members, is not answered (the record then says more than was granted: only more
cautious). To keep the broker's writes few, a raise reaches `ahead` seconds past the lease
(one write covers every grant of the next `ahead` seconds), and once no grant is held on a
vhost the moment comes down to when a poll saw that (`on_poll`): an idle vhost's record
says nothing is outstanding, and a takeover there costs no wait. At most one write per
vhost per `ahead` while grants are made, and one when they stop.

A new process of the same replica (same URL, same id) keeps what its former process
recorded (`GrantOwnership.inherited`): its first write carries those moments on.
Writes are serialised (one at a time, in order) and made in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sidecar.broker import BrokerError
from sidecar.broker.global_parameters import GlobalParameters
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.shared_view import Credit, credit_parameter
from sidecar.signals.grants import Grant

log = logging.getLogger("flow_sidecar.cluster")


class CreditRecord:
    """This replica's record; see the module docstring."""

    def __init__(self, params: GlobalParameters, owners: GrantOwnership, *, ahead: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.params = params
        self.owners = owners
        self.ahead = ahead
        self.clock = clock
        self.held: Callable[[], set[str]] = set  # the vhosts where a grant is held now
        self.until: dict[str, float] = {}  # as the broker acknowledged it
        self.writes = 0
        self._lock = asyncio.Lock()
        self._lowering: asyncio.Future[None] | None = None

    async def cover(self, made: Grant) -> str | None:
        """Record `made` before it is answered; why it must not be answered, or None."""
        if not made.queues:
            return None  # an exchange that routes nowhere: nothing to protect
        vhost = next(iter(made.queues))[0]  # a grant's queues are all on one vhost
        async with self._lock:
            if made.expires_at > self.until.get(vhost, float("-inf")):
                try:
                    await self._write({**self.until, vhost: made.expires_at + self.ahead})
                except BrokerError as exc:
                    log.warning("the credit record could not be written: %s", exc)
                    return f"the credit record could not be written, nothing granted: {exc}"
        return self.owners.refusal(vhost, self.clock())

    def on_poll(self, _infos: object, _now: float) -> None:
        """Poll hook: bring down the moments of vhosts where nothing is held any more."""
        if self._lowering is None or self._lowering.done():
            self._lowering = asyncio.ensure_future(self._lower())

    async def _lower(self) -> None:
        async with self._lock:  # what is held, and when, once no raise is under way
            held, now = self.held(), self.clock()
            lowered = {v: now if v not in held and until > now else until
                       for v, until in self.until.items()}
            if lowered == self.until:
                return
            try:
                await self._write(lowered)
            except BrokerError as exc:  # the higher moments stand: only more cautious
                log.warning("the credit record could not be brought down: %s", exc)

    async def _write(self, until: dict[str, float]) -> None:
        """Put `until` (with what a former process recorded) and wait for the broker;
        called under the lock."""
        merged = {**self.owners.inherited}
        for vhost, moment in until.items():
            merged[vhost] = max(moment, merged.get(vhost, moment))
        await asyncio.to_thread(self.params.put, *credit_parameter(
            self.owners.id, Credit(self.owners.incarnation, merged)))
        self.until = until
        self.writes += 1
