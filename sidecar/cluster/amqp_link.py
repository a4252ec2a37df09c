"""One AMQP connection to the cluster, in a thread of its own, for the webhook delivery queue:
it publishes the events a replica forwards (each confirmed by the broker) and consumes the
queue as one of its single-active consumers.

The queue is a durable quorum queue with `x-single-active-consumer`: its messages live on
a majority of the broker's nodes, and RabbitMQ hands them to one consumer at a time, the
first that registered; when that consumer's connection goes (its replica was killed, its
node stopped), the broker makes the next one active and gives it every unacknowledged
message again. That is the election of the delivering replica, and the handover of its
work, in one.

pika's BlockingConnection belongs to the thread that made it: the event loop talks to the
link through a request queue (`publish`, `ack`) and hears from it through two callbacks,
which the link schedules on the loop (`on_message` for each consumed message, `on_reset`
when a new connection started, which invalidates every earlier delivery tag). A lost
connection is retried, with the next endpoint, every second; requests made meanwhile wait for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pika  # type: ignore[import-untyped]  # pika ships no type information
import pika.exceptions  # type: ignore[import-untyped]

from sidecar.signals.webhook_outbox import OutboxRow

log = logging.getLogger("flow_sidecar.cluster")
QUEUE_ARGUMENTS = {"x-queue-type": "quorum", "x-single-active-consumer": True}
OnMessage = Callable[[int, int, pika.BasicProperties, bytes], None]  # generation, tag, ...


def message_properties(row: OutboxRow) -> pika.BasicProperties:
    """What a consumer needs besides the body: the `webhook-id` and the stream."""
    return pika.BasicProperties(
        message_id=row.msg_id, delivery_mode=2, content_type="application/json",
        headers={"subscription": row.subscription_id, "vhost": row.vhost,
                 "queue": row.queue, "sequence": row.sequence,
                 "created_at": repr(row.created_at)})


class AmqpLink:
    """Publishes to and consumes from the delivery queue; see the module docstring."""

    def __init__(self, endpoints: Sequence[pika.ConnectionParameters], *, queue_name: str,
                 prefetch: int, on_message: OnMessage,
                 on_reset: Callable[[int], None]) -> None:
        self.endpoints = list(endpoints)
        self.queue_name = queue_name
        self.prefetch = prefetch
        self.on_message = on_message
        self.on_reset = on_reset
        self.generation = 0  # +1 per connection; delivery tags belong to one
        self.connected = False
        self._requests: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Connect and consume in a new thread; callbacks run on `loop`."""
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="webhook-queue", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def publish(self, rows: list[OutboxRow]) -> concurrent.futures.Future[None]:
        """Publish rows to the queue; the future is done once the broker confirmed all."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._requests.put(("publish", rows, done))
        return done

    def ack(self, generation: int, tag: int) -> None:
        """Acknowledge a consumed message (dropped if its connection is gone: the broker
        gives the message again, and the consumer knows it was done)."""
        self._requests.put(("ack", generation, tag))

    def _run(self) -> None:
        attempt, failing = 0, False
        while not self._stopping.is_set():
            params = self.endpoints[attempt % len(self.endpoints)]
            attempt += 1
            try:
                self._session(params)
            except (pika.exceptions.AMQPError, OSError) as exc:
                # one line per outage (a lost connection, or the first refusal), not per
                # attempt; "connected to" says when it is over
                if self.connected or not failing:
                    log.warning("webhook delivery queue: connection lost or refused (%s: "
                                "%s); retrying every second", f"{params.host}:{params.port}",
                                f"{type(exc).__name__}: {exc}")
                failing = True
            except Exception:  # a bug must not end delivery for good: log it, reconnect
                log.exception("webhook delivery queue: connection failed")
            self.connected = False
            self._stopping.wait(1.0)

    def _session(self, params: pika.ConnectionParameters) -> None:
        connection = pika.BlockingConnection(params)
        try:
            publisher = connection.channel()
            publisher.confirm_delivery()
            publisher.queue_declare(self.queue_name, durable=True, arguments=QUEUE_ARGUMENTS)
            consumer = connection.channel()
            consumer.basic_qos(prefetch_count=self.prefetch)
            self.generation += 1
            generation = self.generation
            self._on_loop(self.on_reset, generation)
            consumer.basic_consume(self.queue_name, lambda _ch, method, props, body:
                                   self._on_loop(self.on_message, generation,
                                                 method.delivery_tag, props, body))
            self.connected = True
            log.info("webhook delivery queue: connected to %s:%s", params.host, params.port)
            while not self._stopping.is_set():
                connection.process_data_events(time_limit=0.1)
                self._serve(generation, publisher, consumer)
        finally:
            if connection.is_open:
                connection.close()

    def _on_loop(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(callback, *args)

    def _serve(self, generation: int, publisher: Any, consumer: Any) -> None:
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            if request[0] == "ack":
                if request[1] == generation:
                    consumer.basic_ack(request[2])
                continue
            rows, done = request[1], request[2]
            if done.cancelled():  # its caller stopped waiting and will ask again
                continue
            try:
                for row in rows:
                    publisher.basic_publish("", self.queue_name, row.body,
                                            message_properties(row), mandatory=True)
            except (pika.exceptions.AMQPError, OSError):
                # Lost, refused (no majority) or unroutable (the queue was deleted): the next
                # connection declares the queue again and publishes the whole batch again.
                self._requests.put(request)
                raise
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                done.set_result(None)
