"""Flow control for senders that own no connection (Celery's, through kombu): one gate per
destination per process, which a sending thread passes before it publishes.

A gate holds the destination's flow signal (`flowwatch`, one long poll shared by every
thread of the process) and its credit (`credit`, grants spent message by message). `admit`
returns once a message may go: the destination flows and a grant covers the message (or
the sidecar offers no grants). While it is stopped a waiting sender logs Qpid's lines and
gives up with `FlowControlTimeout` after the failure period; a sender that does not wait
gets `FlowStopped` naming the queues that stop it. Such a sender has no window of
unconfirmed messages: its bound is the grants', stop + nothing (docs/producers.md#celery).
While the sidecar is away the publishers' outage policy (`outage.OutageWindow`, one per
gate, shared by its threads) decides: a stop stays a stop, a flow lets the process send
one window, and only after the grace period does it fail open, with one WARNING
(docs/producers.md#when-the-sidecar-is-away).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flow_sidecar_client.credit import CreditLine, grant_path, http_post
from flow_sidecar_client.credit_ledger import ASK_WAIT
from flow_sidecar_client.flow_wait import (
    ENFORCED,
    FlowControlTimeout,
    FlowStopped,
    FlowWait,
    WaitSettings,
)
from flow_sidecar_client.flowwatch import (
    DEFAULT_EXCHANGE,
    Fetch,
    FlowWatcher,
    exchange_flow_path,
    http_fetch,
    http_leave,
    queue_flow_path,
)
from flow_sidecar_client.outage import (
    DEFAULT_GRACE,
    Contact,
    OnUnreachable,
    OutageWindow,
    Verdict,
)
from flow_sidecar_client.publisher import default_producer_id
from flow_sidecar_client.watch_state import Signal

log = logging.getLogger("flow_sidecar.client")

#: Longest stretch (s) between two looks at the flow state while a sender waits.
LOOK_EVERY = 1.0
#: Seconds a sender that does not wait gives a grant under way (the sidecar holds an ask
#: up to ASK_WAIT while it has no credit: none then means the queue is at its stop).
CREDIT_PATIENCE = ASK_WAIT + 1.0


@dataclass(frozen=True)
class Destination:
    """Where a message goes: a queue (through the default exchange) or an exchange and
    routing key, in a vhost."""

    vhost: str
    queue: str | None = None
    exchange: str | None = None
    routing_key: str = ""

    @classmethod
    def of_publish(cls, vhost: str, exchange: str, routing_key: str) -> Destination:
        """The destination of an AMQP publish: the default exchange names a queue."""
        if exchange in ("", DEFAULT_EXCHANGE):
            return cls(vhost, queue=routing_key)
        return cls(vhost, exchange=exchange, routing_key=routing_key)

    def __str__(self) -> str:
        what = (f"queue {self.queue!r}" if self.queue is not None else
                f"exchange {self.exchange!r} routing key {self.routing_key!r}")
        return f"{what} in vhost {self.vhost!r}"


class FlowGate:
    """One destination's flow signal and credit; see the module docstring."""

    def __init__(self, destination: Destination, sidecar_url: str, capacity: int, *,
                 on_unreachable: OnUnreachable = None,
                 unreachable_grace: float = DEFAULT_GRACE,
                 producer_class: str | None = None) -> None:
        self.destination = destination
        self.producer_id = default_producer_id()
        self._answer: dict[str, Any] = {}
        self._outage = OutageWindow(capacity, unreachable_grace, on_unreachable)
        self._lock = threading.Lock()  # the window counts the process's sends one at a time
        d = destination
        path = (queue_flow_path(d.vhost, d.queue) if d.queue is not None
                else exchange_flow_path(d.vhost, d.exchange or ""))
        key = None if d.queue is not None else d.routing_key
        fetch = http_fetch(sidecar_url, path, self.producer_id, capacity, key,
                           producer_class=producer_class)
        self._watcher = FlowWatcher(self._keeping(fetch), str(d), on_unreachable=on_unreachable,
                                    leave=http_leave(sidecar_url, self.producer_id),
                                    grace=unreachable_grace).start()
        self._credit = CreditLine(http_post(sidecar_url, self.producer_id, key, producer_class),
                                  grant_path(d.vhost, d.queue, d.exchange), capacity,
                                  str(d)).start()
        self._enforced_noted = False

    def _keeping(self, fetch: Fetch) -> Fetch:
        """`fetch`, keeping its last answer: an exchange's `stoppedBy` names the queues."""
        def kept(since: int | None, wait: float | None) -> dict[str, Any]:
            answer = fetch(since, wait)
            self._answer = answer
            return answer
        return kept

    @property
    def stopped(self) -> bool:
        """Whether a message would be held now (a grant still held may yet be spent while
        the sidecar is away)."""
        with self._lock:
            return self._verdict() in (Verdict.HOLD, Verdict.GRANTED_ONLY)

    def _verdict(self) -> Verdict:
        return self._outage.verdict(self._watcher.contact(), time.monotonic())

    def _pass(self, size: int) -> Verdict | None:
        """Let one message of `size` bytes go if the policy and its credit allow (None: it
        goes, counted); else the verdict that held it."""
        with self._lock:
            verdict = self._verdict()
            spent = None if verdict is Verdict.HOLD else self._outage.admit(
                verdict, lambda: self._credit.spend(size), self._credit.mode == "required")
            if spent is None:
                return verdict
            if verdict is Verdict.OPEN:
                self._watcher.opened()
            self._outage.sent(verdict, spent)
            return None

    def stopped_by(self) -> tuple[str, ...]:
        """The queues that stop the destination, as the sidecar last named them."""
        if self.destination.queue is not None:
            return (self.destination.queue,)
        return tuple(str(q) for q in self._answer.get("stoppedBy") or ())

    def queues(self) -> tuple[str, ...]:
        """The queues the destination reaches, as the sidecar last named them."""
        if self.destination.queue is not None:
            return (self.destination.queue,)
        return tuple(str(d.get("queue")) for d in self._answer.get("destinations") or ()
                     if isinstance(d, dict))

    def admit(self, size: int, settings: WaitSettings, *, wait: bool = True,
              own: frozenset[str] = frozenset()) -> None:
        """Return once one message of `size` body bytes may be published (its credit
        taken). Raises FlowControlTimeout after `settings.failure_ms` of waiting, or, when
        not `wait`, FlowStopped as soon as the destination is stopped. Never waits on
        queues in `own` (a worker's own queues, which its waiting could keep full): when
        they alone hold the message back (stopped, or out of credit), it goes at once."""
        schedule = FlowWait(settings, time.monotonic())
        patience = schedule.started + CREDIT_PATIENCE
        while True:
            contact = self._watcher.contact()
            verdict = self._pass(size)
            if verdict is None:
                self._enforced_noted = False
                return
            stopped = verdict in (Verdict.HOLD, Verdict.GRANTED_ONLY)
            holding = self.stopped_by() if stopped else self.queues()
            if holding and set(holding) <= own:
                log.debug("%s holds a worker's message back; it consumes %s, so it sends",
                          self.destination, ", ".join(holding))
                return
            now = time.monotonic()
            if not wait and (stopped or now >= patience):
                raise FlowStopped(str(self.destination), self.stopped_by())
            if stopped and not self._enforced_noted and self._watcher.signal is Signal.STOP:
                self._enforced_noted = True
                log.warning(ENFORCED)
            for notice in schedule.notices(now):
                log.warning(notice)
            if schedule.expired(now):
                log.error(FlowControlTimeout.MESSAGE)
                raise FlowControlTimeout(FlowControlTimeout.MESSAGE)
            look = max(0.0, min(schedule.next_event(), now + LOOK_EVERY) - now)
            if stopped:  # until the sidecar says more (or the grace period ends)
                self._credit.expect()  # credit comes with the resume
                self._await_news(contact, look)
            else:  # flowing, a grant under way
                self._credit.wait(look)

    def _await_news(self, seen: Contact, timeout: float) -> None:
        """Wait until the sidecar says something other than `seen` (or `timeout` s)."""
        self._watcher.wait_until(lambda _s: self._watcher.contact() != seen, timeout)

    def close(self) -> None:
        """Stop polling, give back what credit is held, tell the sidecar the producer left."""
        self._watcher.close()
        self._credit.close()


class Gates:
    """The gates of one sender configuration, one per destination, made on first use and
    shared by every thread. A forked child starts with none: the parent's polling threads
    do not exist there."""

    def __init__(self, make: Callable[[Destination], FlowGate]) -> None:
        self._make = make
        self._gates: dict[Destination, FlowGate] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def get(self, destination: Destination) -> FlowGate:
        if self._pid != os.getpid():  # forked: the gates' threads (and locks) stayed behind
            self._lock, self._gates, self._pid = threading.Lock(), {}, os.getpid()
        with self._lock:
            gate = self._gates.get(destination)
            if gate is None:
                gate = self._gates[destination] = self._make(destination)
            return gate

    def close(self) -> None:
        with self._lock:
            gates, self._gates = list(self._gates.values()), {}
            mine = self._pid == os.getpid()
        if mine:
            for gate in gates:
                gate.close()
