"""Webhook delivery that survives the loss of any one replica (`--shared-state broker`).

Every replica forwards the events of its SQLite outbox (`SharedOutbox`) to one durable
quorum queue (`Forwarder`); the replica whose consumer the broker made the queue's single
active consumer delivers them (`QueueOutbox` under the usual `WebhookDelivery` worker, so
retries, backoff, give-up, 410 and order per stream are the same as on a single node).

- A message is acknowledged only once its event was delivered (2xx) or given up. If the
  delivering replica dies, its unacknowledged messages go to the next consumer, which posts
  them again with the same `webhook-id`: at least once, never lost.
- Each replica forwards its own copy of an event, with the same `webhook-id`
  (`shared_outbox.stable_message_id`): the deliverer posts the first copy and acknowledges
  the others without posting. Copies whose first was posted by a replica that has since
  died are posted again by its successor: duplicates, counted and left to receivers'
  de-duplication on `webhook-id`, as Standard Webhooks asks of them.
- Held in memory while unacknowledged (at most `prefetch` messages): a receiver that stays
  down holds its streams' messages, and past `prefetch` the queue keeps the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

import pika  # type: ignore[import-untyped]  # pika ships no type information

from sidecar.cluster.amqp_link import AmqpLink
from sidecar.cluster.shared_outbox import SharedOutbox
from sidecar.signals.webhook_delivery import WebhookDelivery
from sidecar.signals.webhook_outbox import PENDING, OutboxRow, Outcome, StreamKey, Subscription

log = logging.getLogger("flow_sidecar.cluster")
UNKNOWN_SUBSCRIPTION_GRACE = 60.0  # seconds an event may wait for its subscription to sync


@dataclass(frozen=True)
class Finished:
    """How an event ended here, written again onto this replica's own copy of it if that
    copy is forwarded only later."""

    at: float
    delivered: bool
    attempts: int
    http_status: int | None
    error: str | None


@dataclass(frozen=True)
class Held:
    """A consumed, unacknowledged message and the row it stands for."""

    generation: int
    tag: int
    row: OutboxRow
    received_at: float


class QueueOutbox:
    """The delivery queue's messages held by this replica, shaped like the SQLite outbox
    for `WebhookDelivery` (a `DeliverySource`)."""

    def __init__(self, outbox: SharedOutbox, *, ack: Callable[[int, int], None],
                 disable: Callable[[str, str], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.outbox = outbox
        self.ack = ack
        self.disable = disable
        self.clock = clock
        self.changed = asyncio.Event()
        self.generation = 0
        self.received = 0
        self.duplicates = 0  # copies acknowledged without a POST
        self.last_received_at: float | None = None
        self._streams: dict[StreamKey, deque[Held]] = {}
        self._done: dict[str, Finished] = {}  # by webhook-id: delivered or given up
        self._row_ids = itertools.count(1)

    # -- from the link (called on the event loop) -------------------------------------------
    def reset(self, generation: int) -> None:
        """A new connection: every message held so far goes back to the queue."""
        self.generation = generation
        self._streams.clear()
        self.changed.set()

    def receive(self, generation: int, tag: int, props: pika.BasicProperties,
                body: bytes) -> None:
        if generation != self.generation:
            return  # from a connection that is gone; the broker gives it again
        now = self.clock()
        self.received += 1
        self.last_received_at = now
        headers = props.headers or {}
        msg_id = str(props.message_id)
        stream = (str(headers.get("subscription")), str(headers.get("vhost")),
                  str(headers.get("queue")))
        held = self._streams.setdefault(stream, deque())
        finished = self._done.get(msg_id)
        if finished is not None or any(h.row.msg_id == msg_id for h in held):
            self.duplicates += 1
            self.ack(generation, tag)
            if finished is not None:
                self._finish(msg_id, finished)
            return
        created_at = float(headers.get("created_at") or now)
        row = OutboxRow(next(self._row_ids), msg_id, *stream, int(headers.get("sequence", 0)),
                        body, created_at, PENDING, 0, now, None, None, None, None)
        held.append(Held(generation, tag, row, now))
        self.changed.set()

    # -- the DeliverySource -------------------------------------------------------------------
    def heads(self) -> list[OutboxRow]:
        now = self.clock()
        heads = []
        for stream, held in list(self._streams.items()):
            if not held:
                del self._streams[stream]
                continue
            sub = self.outbox.get(stream[0])
            if sub is None and now - held[0].received_at > UNKNOWN_SUBSCRIPTION_GRACE:
                for gone in held:  # deleted: its events go with it
                    self.ack(gone.generation, gone.tag)
                del self._streams[stream]
            elif sub is not None and sub.enabled:
                heads.append(held[0].row)
        return sorted(heads, key=lambda row: row.next_attempt_at)

    def get(self, sub_id: str) -> Subscription | None:
        return self.outbox.get(sub_id)

    def record(self, row: OutboxRow, outcome: Outcome, *, at: float, http_status: int | None,
               error: str | None, next_attempt_at: float | None = None) -> None:
        finished = outcome in (Outcome.DELIVERED, Outcome.FAILED)
        if finished:
            self._done[row.msg_id] = Finished(at, outcome is Outcome.DELIVERED,
                                              row.attempts + 1, http_status, error)
            self._finish(row.msg_id, self._done[row.msg_id])
        held = self._streams.get(row.stream)
        if not held or held[0].row.id != row.id:
            return  # its connection is gone: the broker gives the message again
        if finished:
            head = held.popleft()
            self.ack(head.generation, head.tag)
        else:
            held[0] = replace(held[0], row=replace(
                row, attempts=row.attempts + 1, last_attempt_at=at, last_status=http_status,
                last_error=error, next_attempt_at=next_attempt_at or row.next_attempt_at))
        if outcome is Outcome.GONE:
            self.disable(row.subscription_id, "the receiver answered 410 Gone")
        self.changed.set()

    def _finish(self, msg_id: str, finished: Finished) -> None:
        self.outbox.finish(msg_id, finished.delivered, at=finished.at,
                           attempts=finished.attempts, http_status=finished.http_status,
                           error=finished.error)

    def prune(self, before: float) -> int:
        old = [msg_id for msg_id, done in self._done.items() if done.at < before]
        for msg_id in old:
            del self._done[msg_id]
        return len(old)


class Forwarder:
    """Hands the replica's outbox rows to the delivery queue and marks them forwarded."""

    def __init__(self, outbox: SharedOutbox, link: AmqpLink, *, batch: int = 200,
                 timeout: float = 30.0, retry: float = 1.0) -> None:
        self.outbox = outbox
        self.link = link
        self.batch = batch
        self.timeout = timeout
        self.retry = retry
        self.forwarded = 0

    async def run(self) -> None:
        failing = False
        while True:
            self.outbox.changed.clear()
            rows = self.outbox.to_forward(self.batch)
            if not rows:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5.0):
                        await self.outbox.changed.wait()
                continue
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.wrap_future(self.link.publish(rows))
            except TimeoutError:
                if not failing:
                    log.warning("webhook events not forwarded to the delivery queue within "
                                "%ss (no connection?); they wait in the outbox", self.timeout)
                failing = True
                await asyncio.sleep(self.retry)
                continue
            failing = False
            self.outbox.mark_forwarded(rows)
            self.forwarded += len(rows)


class SharedWork:
    """The background work of a replica sharing its state (Runtime.delivery's place):
    forward events and, while this replica is the queue's active consumer, deliver them."""

    def __init__(self, *, link: AmqpLink, forwarder: Forwarder,
                 delivery: WebhookDelivery) -> None:
        self.link = link
        self.forwarder = forwarder
        self.delivery = delivery

    async def run(self) -> None:
        self.link.start(asyncio.get_running_loop())
        tasks = [asyncio.create_task(self.forwarder.run(), name="webhook-forwarder"),
                 asyncio.create_task(self.delivery.run(), name="webhooks")]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.to_thread(self.link.stop)
