"""The webhook delivery worker: posts outbox rows, in order per stream, streams in parallel.

The POST is blocking I/O (the transport, `webhook_targets.checked_transport` in production)
in a thread of the worker's own pool (one per
concurrent stream), so a slow or dead receiver costs one of those threads, never one the
poller's broker reads need, and never delays `/flow`; the outbox is read and written only
on the event loop. At most `concurrency` streams are in flight. Logs and recorded errors
show receiver URLs redacted (`sidecar.redaction`): their query often holds a key.
A failed attempt is retried with exponential backoff and full jitter (a receiver that
comes back is not hit by every sidecar at once); a row still failing `give_up_after`
seconds after its event is marked failed and its stream moves on. 410 Gone disables the
subscription and leaves the row waiting, so re-enabling resumes exactly where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from sidecar.records.log_lines import printable
from sidecar.redaction import redact_url, scrub
from sidecar.signals.webhook_outbox import OutboxRow, Outcome, StreamKey, Subscription
from sidecar.signals.webhook_signing import signature_headers

log = logging.getLogger("flow_sidecar.webhooks")

# (url, body, headers, timeout) -> HTTP status; raises on a connection error or timeout
Transport = Callable[[str, bytes, dict[str, str], float], int]
IDLE = 60.0  # seconds between wake-ups with nothing due (pruning happens then too)


class DeliverySource(Protocol):
    """Where the worker takes rows from and records attempts in: the SQLite outbox
    (`WebhookOutbox`), or the cluster's delivery queue (`sidecar.cluster.webhook_queue`)."""

    changed: asyncio.Event  # set when there may be something new to do

    def heads(self) -> list[OutboxRow]:
        """The oldest pending row of each stream of an enabled subscription."""
        ...

    def get(self, sub_id: str) -> Subscription | None:
        ...

    def record(self, row: OutboxRow, outcome: Outcome, *, at: float, http_status: int | None,
               error: str | None, next_attempt_at: float | None = None) -> None:
        """Write down one attempt and what it means for the row."""
        ...

    def prune(self, before: float) -> int:
        """Forget finished rows older than `before`."""
        ...


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, and when to give up."""

    base: float = 0.5
    cap: float = 60.0
    give_up_after: float = 86400.0

    def delay(self, attempts: int, rand: float) -> float:
        """Seconds before the next attempt after `attempts` failed ones, `rand` in [0, 1):
        uniform in [0, min(cap, base * 2**(attempts-1)))."""
        exponent = min(max(0, attempts - 1), 64)  # 2**64 * base is past any cap; no overflow
        return rand * min(self.cap, self.base * 2.0 ** exponent)


class WebhookDelivery:
    """Runs until cancelled; woken by the outbox whenever rows or subscriptions change."""

    def __init__(
        self,
        outbox: DeliverySource,
        *,
        timeout: float,
        retry: RetryPolicy,
        concurrency: int,
        retention: float,
        transport: Transport,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.outbox = outbox
        self.timeout = timeout
        self.retry = retry
        self.concurrency = concurrency
        self.retention = retention
        self.transport = transport
        self.clock = clock
        self.rand = rand
        self.in_flight: dict[StreamKey, asyncio.Task[None]] = {}
        self._threads: ThreadPoolExecutor | None = None  # while run() runs

    async def run(self) -> None:
        """Start every due stream head that fits; sleep until something changes or the
        next retry is due."""
        next_prune = 0.0
        self._threads = ThreadPoolExecutor(max_workers=self.concurrency,
                                           thread_name_prefix="webhook")
        try:
            while True:
                self.outbox.changed.clear()
                now = self.clock()
                if now >= next_prune:
                    self.outbox.prune(now - self.retention)
                    next_prune = now + IDLE
                wait = IDLE
                for row in self.outbox.heads():
                    if row.stream in self.in_flight:
                        continue
                    if row.next_attempt_at > now:
                        wait = min(wait, row.next_attempt_at - now)
                    elif len(self.in_flight) < self.concurrency:
                        self._start(row)
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # arrives as the event is set, and this loop would then never end
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self.outbox.changed.wait()
        finally:
            for task in self.in_flight.values():
                task.cancel()
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _start(self, row: OutboxRow) -> None:
        task = asyncio.create_task(self.attempt(row), name=f"webhook {row.msg_id}")
        self.in_flight[row.stream] = task

        def finished(done: asyncio.Task[None]) -> None:
            self.in_flight.pop(row.stream, None)
            self.outbox.changed.set()  # the stream's next row may go now
            if not done.cancelled() and done.exception() is not None:
                log.error("webhook delivery of %s crashed", row.msg_id,
                          exc_info=done.exception())

        task.add_done_callback(finished)

    async def attempt(self, row: OutboxRow) -> None:
        """One signed POST of one row, and its record."""
        sub = self.outbox.get(row.subscription_id)
        if sub is None or not sub.enabled:  # deleted or disabled meanwhile
            return
        sent_at = int(self.clock())
        headers = signature_headers(sub.secret, row.msg_id, sent_at, row.body)
        http_status: int | None = None
        try:
            http_status = await asyncio.get_running_loop().run_in_executor(
                self._threads,
                functools.partial(self.transport, sub.url, row.body, headers, self.timeout))
            error = None if 200 <= http_status < 300 else f"HTTP {http_status}"
        except Exception as exc:  # noqa: BLE001 (refused, timeout, a refused target: all retried)
            error = scrub(f"{type(exc).__name__}: {exc}", sub.url)[:500]
        now = self.clock()
        if error is None:
            self.outbox.record(row, Outcome.DELIVERED, at=now, http_status=http_status,
                               error=None)
            return
        attempts = row.attempts + 1
        deadline = row.created_at + self.retry.give_up_after
        if http_status == 410:
            outcome, next_at = Outcome.GONE, None
            log.warning("webhook %s disabled: %s answered 410 Gone", sub.id, redact_url(sub.url))
        elif now >= deadline:
            outcome, next_at = Outcome.FAILED, None
            log.warning("webhook %s: gave up on event %s of %s/%s after %d attempts: %s",
                        sub.id, row.sequence, printable(row.vhost), printable(row.queue),
                        attempts, error)
        else:
            outcome = Outcome.RETRY
            next_at = min(now + self.retry.delay(attempts, self.rand()), deadline)
            log.log(logging.WARNING if attempts == 1 else logging.DEBUG,
                    "webhook %s: delivery to %s failed (%s), attempt %d; retrying",
                    sub.id, redact_url(sub.url), error, attempts)
        self.outbox.record(row, outcome, at=now, http_status=http_status, error=error,
                           next_attempt_at=next_at)
