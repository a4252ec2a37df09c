"""`FlowControlledPublisher` for asyncio: an aio-pika producer whose `await publish()`
waits, without blocking the event loop, while the sidecar says its destination is flow
stopped. Needs the `aio` extra (`pip install "./client[aio]"`).

    async with FlowControlledPublisher("orders", capacity=50) as publisher:
        await publisher.publish(b"...")

It behaves as the blocking publisher (`publisher`) does, and shares its rules: Qpid's log
lines and wait schedule (`flow_wait`), credit grants (`credit_ledger`, topped up by a task),
the outage policy (`outage`). `capacity` messages at most are unconfirmed (publisher
confirms through aio-pika; a refusal is raised by the next `publish()`, `flush()` or the
end of the `async with`). Publishers of one destination in one process share one long poll
(`aio_watch`). `amqp` is a URL or an aio-pika connection to share: thousands of publishers
then hold a channel each on one connection, instead of a connection each.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote

import aio_pika
import aio_pika.abc
import aiormq.exceptions
from aio_pika.exceptions import DeliveryError, PublishError
from pamqp.commands import Basic

from flow_sidecar_client.aio_credit import AsyncCreditLine
from flow_sidecar_client.aio_watch import AsyncSidecar, SharedWatch, shared_watch
from flow_sidecar_client.aio_watch import sidecar as sidecar_client
from flow_sidecar_client.confirms import ConfirmWindow, Returned
from flow_sidecar_client.credit import grant_path
from flow_sidecar_client.credit_ledger import GrantsMode
from flow_sidecar_client.flow_wait import ENFORCED, FlowWait, WaitSettings
from flow_sidecar_client.flowwatch import exchange_flow_path, queue_flow_path
from flow_sidecar_client.outage import DEFAULT_GRACE, Known, OnUnreachable, OutageWindow, Verdict
from flow_sidecar_client.publisher import DEFAULT_AMQP_URL, PUMP_INTERVAL, default_producer_id
from flow_sidecar_client.sidecar_url import sidecar_url as resolve_url

log = logging.getLogger("flow_sidecar.client")

Amqp = str | aio_pika.abc.AbstractConnection


class FlowControlledPublisher:
    """Publishes to a queue (default exchange) or an exchange + routing key, with publisher
    confirms, waiting while the sidecar says the destination is flow stopped."""

    def __init__(self, queue: str | None = None, *, exchange: str | None = None,
                 routing_key: str = "", amqp: Amqp = DEFAULT_AMQP_URL,
                 sidecar_url: str | None = None, capacity: int = 50,
                 grants: GrantsMode = "auto", vhost: str | None = None,
                 flow_control_wait_notify_period: int | None = None,
                 flow_control_wait_failure: int | None = None,
                 on_unreachable: OnUnreachable = None,
                 unreachable_grace: float = DEFAULT_GRACE, producer_id: str | None = None,
                 mandatory: bool = True, poll_wait: float = 30.0,
                 pacing: bool = False) -> None:
        if (queue is None) == (exchange is None):
            raise ValueError("give either a queue or an exchange (with its routing_key)")
        self.settings = WaitSettings.resolve(flow_control_wait_notify_period,
                                             flow_control_wait_failure, os.environ)
        self.producer_id = producer_id or default_producer_id()
        self.mandatory = mandatory
        self.published = 0
        self._queue, self._exchange_name = queue, exchange or ""
        self._routing_key = queue if queue is not None else routing_key
        self._amqp = amqp
        self._vhost = vhost
        self._url = resolve_url(sidecar_url)
        self._grants: GrantsMode = grants
        self._poll_wait = poll_wait
        self._pacing = pacing  # report what is sent and keep to the offered suggestedRate
        self._on_unreachable = on_unreachable
        self._window = ConfirmWindow(capacity)
        self._outage = OutageWindow(capacity, unreachable_grace, on_unreachable)
        self._room = asyncio.Condition()  # the window: a confirm frees a place
        self._pending: set[asyncio.Task[None]] = set()
        self._enforced_noted = False
        self._owned: aio_pika.abc.AbstractConnection | None = None
        self._sidecar: AsyncSidecar | None = None
        self._watch: SharedWatch | None = None
        self._credit: AsyncCreditLine | None = None
        self._target: aio_pika.abc.AbstractExchange | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self.destination = ""

    @property
    def capacity(self) -> int:
        return self._window.capacity

    @property
    def flow_stopped(self) -> bool:
        """Whether `publish()` would wait now for flow control."""
        return self._verdict() in (Verdict.HOLD, Verdict.GRANTED_ONLY)

    def _verdict(self) -> Verdict:
        assert self._watch is not None, "use the publisher in `async with`"
        return self._outage.verdict(self._watch.contact(), time.monotonic())

    async def __aenter__(self) -> Self:
        if isinstance(self._amqp, str):
            connection: aio_pika.abc.AbstractConnection = await aio_pika.connect_robust(
                self._amqp, client_properties={"connection_name": self.producer_id})
            self._owned = connection
        else:
            connection = self._amqp
        try:
            await self._open(connection)
        except BaseException:
            await self._shutdown()
            raise
        return self

    async def _open(self, connection: aio_pika.abc.AbstractConnection) -> None:
        self._channel = await connection.channel(publisher_confirms=True,
                                                 on_return_raises=True)
        self._target = (self._channel.default_exchange if not self._exchange_name else
                        await self._channel.get_exchange(self._exchange_name, ensure=False))
        url = getattr(connection, "url", None)  # aio-pika's Connection has it; its ABC not
        vhost = self._vhost or (unquote(url.raw_path[1:]) if url is not None else "") or "/"
        if self._queue is not None:
            path, key, what = queue_flow_path(vhost, self._queue), None, f"queue {self._queue!r}"
        else:
            path, key = exchange_flow_path(vhost, self._exchange_name), self._routing_key
            what = f"exchange {self._exchange_name!r} routing key {self._routing_key!r}"
        self.destination = f"{what} in vhost {vhost!r}"
        self._sidecar = sidecar_client(self._url)
        self._watch = shared_watch(self._sidecar, path, key, self.destination,
                                   f"{self.producer_id}-watch", poll_wait=self._poll_wait,
                                   on_unreachable=self._on_unreachable,
                                   grace=self._outage.grace, pacing=self._pacing)
        await self._watch.joined(self.capacity)
        self._credit = AsyncCreditLine(
            self._sidecar, grant_path(vhost, self._queue, self._exchange_name or None), key,
            self.producer_id, self.capacity, self.destination, mode=self._grants).start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if exc_type is None:
                await self.flush(self.settings.failure_ms / 1000)
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        for task in self._pending:
            task.cancel()
        if self._credit is not None:
            await self._credit.close()
        if self._watch is not None:
            await self._watch.left(self.capacity)
            self._watch = None
        if self._sidecar is not None:
            await self._sidecar.release()
            self._sidecar = None
        if self._channel is not None and self._owned is None:
            await self._channel.close()
        if self._owned is not None:
            await self._owned.close()

    async def publish(self, body: bytes, **properties: Any) -> None:
        """Send one message once flow control allows it and the window has room; keyword
        arguments are aio_pika.Message's (headers, delivery_mode, ...).

        Raises FlowControlTimeout (message not sent) after `flow_control_wait_failure` ms
        of waiting, and PublishError for earlier messages the broker refused."""
        assert self._watch is not None and self._credit is not None, \
            "use the publisher in `async with`"
        credit = self._credit
        wait = FlowWait(self.settings, time.monotonic())
        while True:
            self._raise_refusals()
            verdict = self._verdict()
            paced = self._watch.paced_for()
            if verdict is not Verdict.HOLD and paced > 0:  # advice: not a flow stop
                wait.tick(time.monotonic(), log)
                await self._watch.changed(min(paced, PUMP_INTERVAL))
                continue
            if verdict is not Verdict.HOLD and not self._window.full:
                spent = self._outage.admit(
                    verdict, lambda: credit.spend(len(body), self._window.last_tag + 1),
                    self._grants == "required")
                if spent is not None:
                    if verdict is Verdict.OPEN:
                        self._watch.opened()
                    self._send(body, properties)
                    self._outage.sent(verdict, spent)
                    self._enforced_noted = False
                    return
            contact = self._watch.contact()
            if (verdict is Verdict.HOLD and not self._enforced_noted
                    and contact.known is Known.STOP and contact.unreachable_since is None):
                self._enforced_noted = True
                log.warning(ENFORCED)
            wait.tick(time.monotonic(), log)
            left = max(0.0, min(wait.next_event() - time.monotonic(), PUMP_INTERVAL))
            if self._window.full:
                async with self._room:
                    await _within(self._room.wait_for(lambda: not self._window.full), left)
            elif credit.starved:
                await credit.wait(left)
            else:
                credit.expect()
                await self._watch.changed(left)

    def _send(self, body: bytes, properties: dict[str, Any]) -> None:
        """Hand the message to aio-pika; its confirm is awaited in a task of its own."""
        assert self._target is not None
        self._window.sent()
        tag = self._window.last_tag
        message = aio_pika.Message(body, **properties)
        confirm = self._target.publish(message, self._routing_key, mandatory=self.mandatory)
        task = asyncio.create_task(self._confirmed(tag, confirm))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        self.published += 1
        assert self._watch is not None
        self._watch.sent()

    async def _confirmed(self, tag: int, confirm: Any) -> None:
        ack = True
        try:
            await confirm
        except PublishError as exc:
            returned = exc.message.delivery if exc.message is not None else None
            if isinstance(returned, Basic.Return):
                self._window.on_return(Returned(
                    int(returned.reply_code or 0), str(returned.reply_text or ""),
                    str(returned.exchange or ""), str(returned.routing_key or "")))
        except DeliveryError:
            ack = False
        except aiormq.exceptions.AMQPError:  # connection lost: the confirm will not come
            ack = False
        self._window.on_confirm(tag, False, ack)
        if self._credit is not None:
            self._credit.confirmed(min(self._window.unconfirmed,
                                       default=self._window.last_tag + 1))
        async with self._room:
            self._room.notify_all()

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent is confirmed; raise PublishError for refusals
        and TimeoutError if confirms are still missing after `timeout` seconds."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)
        self._raise_refusals()
        if self._window.unconfirmed:
            raise TimeoutError(f"{len(self._window.unconfirmed)} message(s) still unconfirmed "
                               f"after {timeout}s")

    def _raise_refusals(self) -> None:
        error = self._window.take_error()
        if error is not None:
            raise error


async def _within(waiting: Any, timeout: float) -> None:
    try:
        await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        pass
