"""The delivery worker with a fake transport (the seam `requests` plugs into), a real
SQLite outbox and a real event loop: order per stream, parallel streams, retries, 410."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from api.store import Store
from sidecar.model import Change
from sidecar.signals.webhook_delivery import RetryPolicy, Transport, WebhookDelivery
from sidecar.signals.webhook_outbox import DELIVERED, FAILED, PENDING, WebhookOutbox
from sidecar.signals.webhook_signing import sign

SECRET = "a passphrase"
FAST = RetryPolicy(base=0.01, cap=0.02, give_up_after=60.0)


class Receiver:
    """Records every POST; `answer(queue, sequence, calls so far)` decides the status."""

    def __init__(self, answer: Callable[[str, int, int], int] = lambda q, s, n: 200) -> None:
        self.answer = answer
        self.calls: list[tuple[str, int, dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
        data = json.loads(body)
        with self.lock:
            self.calls.append((data["queue"], data["sequence"], headers, body))
            n = len(self.calls)
        return self.answer(data["queue"], data["sequence"], n)

    def seen(self, queue: str) -> list[int]:
        return [seq for q, seq, _, _ in self.calls if q == queue]


def event(change: Change, sequence: int, now: float) -> dict[str, Any]:
    return {"queue": change.queue, "sequence": sequence}


def setup(tmp_path: Path, transport: Transport, retry: RetryPolicy = FAST
          ) -> tuple[WebhookOutbox, WebhookDelivery, str]:
    outbox = WebhookOutbox(Store(tmp_path / "db.sqlite3"), event)
    sub = outbox.create(url="http://127.0.0.1:9/hook", secret=SECRET, vhost="*", queue="*")
    delivery = WebhookDelivery(outbox, timeout=1.0, retry=retry, concurrency=4,
                               retention=3600.0, transport=transport)
    return outbox, delivery, sub.id


def emit(outbox: WebhookOutbox, *queues: str) -> None:
    for queue in queues:
        outbox.on_change(Change("/", queue, 1, True))


@contextlib.asynccontextmanager
async def worker(delivery: WebhookDelivery) -> AsyncIterator[None]:
    """The delivery worker running for the block."""
    task = asyncio.create_task(delivery.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.005)


async def deliver_all(delivery: WebhookDelivery) -> None:
    async with worker(delivery):
        await until(lambda: delivery.outbox.outbox_depth() == 0)


def statuses(outbox: WebhookOutbox, sub_id: str) -> list[tuple[str, int, str]]:
    return sorted((r.queue, r.sequence, r.status) for r in outbox.deliveries(sub_id, 100))


def test_in_order_per_stream_while_other_streams_go_on(tmp_path: Path) -> None:
    release = threading.Event()
    receiver = Receiver(lambda q, s, n: 200 if (q, s) != ("slow", 1) or release.wait(5)
                        else 500)
    outbox, delivery, sub = setup(tmp_path, receiver)
    emit(outbox, "slow", "slow", "fast", "fast", "fast")

    async def scenario() -> None:
        def fast_done() -> bool:
            return [s for q, _, s in statuses(outbox, sub) if q == "fast"] == [DELIVERED] * 3
        async with worker(delivery):
            try:
                await until(fast_done)
                assert receiver.seen("slow") == [1], "slow #2 must wait for slow #1"
            finally:
                release.set()
            await until(lambda: outbox.outbox_depth() == 0)

    asyncio.run(scenario())
    assert receiver.seen("fast") == [1, 2, 3]
    assert receiver.seen("slow") == [1, 2]


def test_retries_keep_the_webhook_id_and_sign_each_attempt(tmp_path: Path) -> None:
    def flaky(q: str, s: int, n: int) -> int:
        if n <= 2:
            raise ConnectionRefusedError("receiver down")
        return 204

    receiver = Receiver(flaky)
    outbox, delivery, sub = setup(tmp_path, receiver)
    emit(outbox, "q")
    asyncio.run(deliver_all(delivery))

    assert len(receiver.calls) == 3
    assert len({headers["webhook-id"] for _, _, headers, _ in receiver.calls}) == 1
    for _, _, headers, body in receiver.calls:
        expected = sign(SECRET, headers["webhook-id"], int(headers["webhook-timestamp"]), body)
        assert headers["webhook-signature"] == expected
    row = outbox.deliveries(sub, 1)[0]
    assert (row.status, row.attempts, row.last_status, row.last_error) == (
        DELIVERED, 3, 204, None)
    assert outbox.failures_total() == 2


def test_gives_up_at_the_age_limit_and_the_stream_moves_on(tmp_path: Path) -> None:
    receiver = Receiver(lambda q, s, n: 500 if s == 1 else 200)
    outbox, delivery, sub = setup(tmp_path, receiver, RetryPolicy(0.01, 0.02, 0.2))
    emit(outbox, "q", "q")
    asyncio.run(deliver_all(delivery))

    assert statuses(outbox, sub) == [("q", 1, FAILED), ("q", 2, DELIVERED)]
    failed = outbox.deliveries(sub, 2)[1]
    assert failed.attempts >= 2 and failed.last_error == "HTTP 500"
    assert receiver.seen("q")[-1] == 2 and receiver.seen("q").count(2) == 1


def test_410_disables_until_re_enabled_then_resumes_in_order(tmp_path: Path) -> None:
    gone = threading.Event()
    gone.set()
    receiver = Receiver(lambda q, s, n: 410 if gone.is_set() else 200)
    outbox, delivery, sub = setup(tmp_path, receiver)
    emit(outbox, "q", "q")

    async def scenario() -> None:
        def disabled() -> bool:
            found = outbox.get(sub)
            return found is not None and not found.enabled
        async with worker(delivery):
            await until(disabled)
            await asyncio.sleep(0.1)
            assert receiver.seen("q") == [1]
            assert statuses(outbox, sub) == [("q", 1, PENDING), ("q", 2, PENDING)]
            gone.clear()
            outbox.set_enabled(sub, True)
            await until(lambda: outbox.outbox_depth() == 0)

    asyncio.run(scenario())
    assert receiver.seen("q") == [1, 1, 2]
