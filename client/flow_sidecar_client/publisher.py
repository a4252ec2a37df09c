"""`FlowControlledPublisher`: a pika producer that honours the sidecar's flow control the
way Qpid's clients honour the broker's.

    with FlowControlledPublisher("orders", capacity=50) as publisher:
        publisher.publish(b"...")

Before each message it reads the destination's flow state from memory (kept current by a
long-poll thread, `flowwatch`). While the destination is stopped `publish()` blocks
and logs as Qpid's client does (logger `flow_sidecar.client`): `Broker enforced flow
control has been enforced` (WARNING) once when a stop first holds a message back, `Message
send delayed by 5s due to broker enforced flow control` (WARNING) every
`flow_control_wait_notify_period` ms, and after `flow_control_wait_failure` ms `Message send
failed due to timeout waiting on broker enforced flow control` (ERROR) as it raises
`FlowControlTimeout` without sending the message.
Both default to Qpid's values (5000, 120000) and can be set in code or through the
environment (`FLOW_CONTROL_WAIT_NOTIFY_PERIOD`, `FLOW_CONTROL_WAIT_FAILURE`); the sidecar is
`FLOW_SIDECAR_URL`. Producers without this library are untouched: nothing changes in the
broker.

Capacity and confirms. `capacity` is the seed's sender capacity: at most that many
messages are unconfirmed (publisher confirms) at any time; a full window blocks like a
stopped destination, with the same notices and timeout, because a broker that withholds
confirms (RabbitMQ's own memory or disk alarm) is enforcing flow control. pika's
`BlockingChannel.confirm_delivery()` would wait for every ack (a window of one), so this
module relies on details of pika 1.x (tested with 1.4): it registers its own callbacks on
the underlying channel, `channel._impl.confirm_delivery(ack_nack_callback=...)` and
`channel._impl.add_on_return_callback(...)`, to count acks, nacks and returns as they are
read; while the window is full it calls `connection.process_data_events(time_limit=...)`,
which a `connection.call_later(0, ...)` from the ack callback makes return at the first
confirm instead of at the time limit. This was chosen over a `SelectConnection` in an I/O
thread because every error (nack, return, timeout, lost connection) is then raised in the
caller's thread by the call that meets it, with no hand-over between threads. Nacks and
`mandatory` messages the broker returns (no queue bound) raise `MessageNacked` /
`MessageReturned` from the next `publish()`, `flush()` or `close()`: confirms arrive after
the call that sent the message returned.

Overshoot. Qpid's broker holds a transfer's completion the moment a queue is over its stop
threshold, so the worst case is stop + the producers' summed capacity (the seed's 100 + 50
+ 15 = 165). RabbitMQ confirms regardless; the library stops *sending* once it learns of the
stop, and it learns late: the broker's statistics refresh, the sidecar's poll and the
long-poll wake-up (about 1.5 s with `deploy/rabbitmq.conf`). So peak ≈ stop + Σ rate × lag,
where each producer's rate is itself bounded by capacity / confirm round-trip. That is
long-poll alone (`grants="off"`, or a sidecar without grants). By default the publisher
also spends credit grants (`credit`, two at most, each sized for its rate): the sidecar grants
no more than the queue can take below its stop, so the lag no longer overshoots.

Threads. One publisher may be shared by threads: its channel is used under a lock, so
calls are serialized and the threads share one window; threads blocked by flow control wait
on the flow state, not on the lock. For independent windows (the seed's C1 and C2) give
each thread its own publisher. While blocked the connection is serviced at least every
second (heartbeats); an idle producer should call `flush()` now and then for the same reason.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

import pika  # type: ignore[import-untyped]  # pika ships no type information
import pika.connection  # type: ignore[import-untyped]
import pika.frame  # type: ignore[import-untyped]
import pika.spec  # type: ignore[import-untyped]
from pika.adapters.blocking_connection import BlockingChannel  # type: ignore[import-untyped]

from flow_sidecar_client.confirms import ConfirmWindow, PublishError, Returned
from flow_sidecar_client.credit import CreditLine, grant_path, http_post
from flow_sidecar_client.credit_ledger import GrantsMode
from flow_sidecar_client.flow_wait import ENFORCED, FlowWait, WaitSettings
from flow_sidecar_client.flow_wait import FlowControlTimeout as FlowControlTimeout  # callers'
from flow_sidecar_client.flowwatch import (
    FlowWatcher,
    exchange_flow_path,
    http_fetch,
    http_leave,
    queue_flow_path,
)
from flow_sidecar_client.outage import (
    DEFAULT_GRACE,
    Known,
    OnUnreachable,
    OutageWindow,
    Verdict,
)
from flow_sidecar_client.send_pacing import PACED_POLL, SendPacing
from flow_sidecar_client.sidecar_url import sidecar_url as resolve_url

log = logging.getLogger("flow_sidecar.client")

DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
#: Longest stretch (s) a blocked publisher leaves the connection unserviced.
PUMP_INTERVAL = 1.0
_ids = itertools.count(1)


def default_producer_id() -> str:
    """hostname-pid-counter: unique per publisher, readable in the sidecar's CHN-1005 lines."""
    return f"{socket.gethostname()}-{os.getpid()}-{next(_ids)}"


class FlowControlledPublisher:
    """Publishes to a queue (default exchange) or an exchange + routing key, with publisher
    confirms, blocking while the sidecar says the destination is flow-stopped."""

    def __init__(
        self,
        queue: str | None = None,
        *,
        exchange: str | None = None,
        routing_key: str = "",
        capacity: int = 50,
        amqp: str | pika.connection.Parameters = DEFAULT_AMQP_URL,
        sidecar_url: str | None = None,
        flow_control_wait_notify_period: int | None = None,
        flow_control_wait_failure: int | None = None,
        on_unreachable: OnUnreachable = None,
        unreachable_grace: float = DEFAULT_GRACE,
        producer_id: str | None = None,
        mandatory: bool = True,
        poll_wait: float = 30.0,
        max_message_bytes: int | None = None,
        grants: GrantsMode = "auto",
        pacing: bool = False,
    ) -> None:
        if (queue is None) == (exchange is None):
            raise ValueError("give either a queue or an exchange (with its routing_key)")
        if max_message_bytes is not None and max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be at least 1, not {max_message_bytes}")
        self.settings = WaitSettings.resolve(flow_control_wait_notify_period,
                                             flow_control_wait_failure, os.environ)
        self.on_unreachable = on_unreachable
        self.producer_id = producer_id or default_producer_id()
        self.mandatory = mandatory
        self._window = ConfirmWindow(capacity)
        self._exchange = "" if exchange in (None, "amq.default") else exchange
        self._routing_key = queue if queue is not None else routing_key
        self.published = 0
        # pacing=True: report `published` and send at the offered suggestedRate
        self._pacing = SendPacing() if pacing else None
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._awaiting_confirms = False
        self._closed = False
        self._enforced_noted = False  # the ENFORCED warning of this stop was logged
        self._outage = OutageWindow(capacity, unreachable_grace, on_unreachable)

        parameters = pika.URLParameters(amqp) if isinstance(amqp, str) else amqp
        if parameters.client_properties is None:
            parameters.client_properties = {"connection_name": self.producer_id}
        vhost = parameters.virtual_host
        self._connection = pika.BlockingConnection(parameters)
        try:
            self._channel = self._open_channel()
            url = resolve_url(sidecar_url)
            if queue is not None:
                path, key, what = queue_flow_path(vhost, queue), None, f"queue {queue!r}"
            else:
                path, key = exchange_flow_path(vhost, exchange or ""), routing_key
                what = f"exchange {exchange!r} routing key {routing_key!r}"
            self.destination = f"{what} in vhost {vhost!r}"
            window_bytes = None if max_message_bytes is None else capacity * max_message_bytes
            self._watcher = FlowWatcher(
                http_fetch(url, path, self.producer_id, capacity, key, window_bytes,
                           published=(lambda: self.published) if pacing else None),
                self.destination, on_unreachable=on_unreachable,
                poll_wait=min(poll_wait, PACED_POLL) if pacing else poll_wait,
                leave=http_leave(url, self.producer_id), grace=unreachable_grace).start()
            self._credit = CreditLine(
                http_post(url, self.producer_id, key), grant_path(vhost, queue, exchange),
                capacity, self.destination, mode=grants).start()
        except BaseException:
            self._connection.close()
            raise

    def _open_channel(self) -> BlockingChannel:
        """A channel in confirm mode whose acks, nacks and returns land in the window."""
        channel = self._connection.channel()
        # pika's own confirm_delivery() waits for each ack; see the module docstring. The
        # return callback is registered on the same underlying channel so that a Basic.Return
        # is recorded as soon as it is read, like the ack that follows it (BlockingChannel's
        # own callback would be deferred to the next process_data_events).
        channel._impl.confirm_delivery(ack_nack_callback=self._on_confirm)
        channel._impl.add_on_return_callback(
            lambda _ch, method, _props, _body: self._window.on_return(Returned(
                method.reply_code, method.reply_text, method.exchange, method.routing_key)))
        return channel

    # -- state ----------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self._window.capacity

    @property
    def unconfirmed(self) -> int:
        return len(self._window.unconfirmed)

    @property
    def flow_stopped(self) -> bool:
        """Whether `publish()` would block now for flow control (a grant still held may
        yet be spent while the sidecar is away)."""
        return self._verdict() in (Verdict.HOLD, Verdict.GRANTED_ONLY)

    def _verdict(self) -> Verdict:
        return self._outage.verdict(self._watcher.contact(), time.monotonic())

    # -- publishing -----------------------------------------------------------------
    def publish(self, body: bytes, properties: pika.BasicProperties | None = None) -> None:
        """Send one message once flow control allows it and the window has room.

        Raises FlowControlTimeout (message not sent) after `flow_control_wait_failure` ms
        of waiting, and PublishError for earlier messages the broker refused; ValueError
        for a body over `max_message_bytes` (the byte window declared to the sidecar)."""
        if self.max_message_bytes is not None and len(body) > self.max_message_bytes:
            raise ValueError(f"a {len(body)}-byte message is over max_message_bytes="
                             f"{self.max_message_bytes}")
        wait = FlowWait(self.settings, time.monotonic())
        while True:
            self._check_open()
            verdict = self._verdict()
            paced = self._paced_for()
            if verdict is not Verdict.HOLD and paced > 0:  # advice: not a flow stop
                wait.tick(time.monotonic(), log)
                self._watcher.wait_until(lambda _s: False, min(paced, self._slice(wait)))
                self._service_if_idle()
                continue
            if verdict is not Verdict.HOLD and self._try_send(body, properties,
                                                              self._slice(wait)):
                self._enforced_noted = False
                if self._pacing is not None:
                    self._pacing.sent(time.monotonic())
                return
            if verdict is Verdict.HOLD:
                self._note_enforced()
            wait.tick(time.monotonic(), log)
            if self._credit.starved:  # waiting for a grant
                self._credit.wait(self._slice(wait))
            elif not self._window.full:  # flow control, the outage policy, or credit later
                self._credit.expect()
                held = self._verdict()
                self._watcher.wait_until(lambda _s: self._verdict() is not held,
                                         self._slice(wait))
            self._service_if_idle()

    def _paced_for(self) -> float:
        """Seconds the send must wait for the offered rate (`send_pacing`); 0 when it may
        go now or the publisher is not paced."""
        if self._pacing is None:
            return 0.0
        now = time.monotonic()
        self._pacing.offered(self._watcher.suggested_rate, now)
        return self._pacing.wait(now)

    def _note_enforced(self) -> None:
        """Qpid's first warning, once per stop that holds messages back (not for a sidecar
        that gives no answer: the watcher warns about that, nor for a full window)."""
        contact = self._watcher.contact()
        if (not self._enforced_noted and contact.known is Known.STOP
                and contact.unreachable_since is None):
            self._enforced_noted = True
            log.warning(ENFORCED)

    @staticmethod
    def _slice(wait: FlowWait) -> float:
        """How long to wait before looking again: until the next notice or timeout, and
        never more than PUMP_INTERVAL."""
        now = time.monotonic()
        return max(0.0, min(wait.next_event(), now + PUMP_INTERVAL) - now)

    def _try_send(self, body: bytes, properties: pika.BasicProperties | None,
                  timeout: float) -> bool:
        """Send if the window has room (waiting up to `timeout` for a confirm); False when
        it did not send."""
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            self._raise_refusals()
            if self._window.full:
                self._await_confirms(lambda: not self._window.full, timeout)
                self._raise_refusals()
            verdict = self._verdict()
            if self._window.full or verdict is Verdict.HOLD:
                return False
            spent = self._outage.admit(
                verdict, lambda: self._credit.spend(len(body), self._window.last_tag + 1),
                self._credit.mode == "required")
            if spent is None:
                return False
            if verdict is Verdict.OPEN:
                self._watcher.opened()
            # Count it first: its ack can arrive while basic_publish flushes the socket.
            self._window.sent()
            self._channel.basic_publish(self._exchange, self._routing_key, body, properties,
                                        mandatory=self.mandatory)
            self.published += 1
            self._outage.sent(verdict, spent)
            return True
        finally:
            self._lock.release()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent is confirmed; raise PublishError for refusals
        and TimeoutError if confirms are still missing after `timeout` seconds."""
        with self._lock:
            self._check_open()
            self._await_confirms(lambda: not self._window.unconfirmed, timeout)
            self._raise_refusals()
            if self._window.unconfirmed:
                raise TimeoutError(f"{self.unconfirmed} message(s) still unconfirmed after "
                                   f"{timeout}s")

    def close(self) -> None:
        """Wait for outstanding confirms (up to the failure period), stop the flow watcher
        and close the connection; refusals found on the way are raised."""
        if self._closed:
            return
        try:
            self.flush(self.settings.failure_ms / 1000)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self._closed = True
        self._watcher.close()
        self._credit.close()
        with self._lock:
            if self._connection.is_open:
                self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self._shutdown()  # do not hide the caller's exception behind a confirm error

    # -- connection servicing (callers hold the lock unless noted) --------------------
    def _await_confirms(self, done: Callable[[], bool], timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._awaiting_confirms = True
        try:
            while not done():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                self._connection.process_data_events(
                    PUMP_INTERVAL if left is None else min(left, PUMP_INTERVAL))
        finally:
            self._awaiting_confirms = False

    def _on_confirm(self, frame: pika.frame.Method) -> None:
        """Runs inside pika's I/O processing, in the thread holding the lock."""
        method = frame.method
        assert isinstance(method, (pika.spec.Basic.Ack, pika.spec.Basic.Nack))
        self._window.on_confirm(method.delivery_tag, method.multiple,
                                isinstance(method, pika.spec.Basic.Ack))
        self._credit.confirmed(min(self._window.unconfirmed,
                                   default=self._window.last_tag + 1))
        if self._awaiting_confirms:
            # process_data_events only returns early for pika-level events: make one.
            self._connection.call_later(0, _nothing)

    def _service_if_idle(self) -> None:
        """Answer heartbeats and collect confirms while blocked (lock not held by caller)."""
        if self._lock.acquire(blocking=False):
            try:
                if self._connection.is_open:
                    self._connection.process_data_events(0)
            finally:
                self._lock.release()

    def _raise_refusals(self) -> None:
        error = self._window.take_error()
        if error is not None:
            raise error

    def _check_open(self) -> None:
        if self._closed:
            raise PublishError(f"the publisher for {self.destination} is closed")


def _nothing() -> None:
    """A pika timer callback whose only job is to end `process_data_events` early."""
