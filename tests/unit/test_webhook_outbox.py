"""The outbox over a real SQLite store: rows per subscription, per-queue sequences, streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.store import Store
from sidecar.flow.engine import FlowEngine
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import Change, QueueInfo
from sidecar.signals.webhook_outbox import DELIVERED, FAILED, PENDING, Outcome, WebhookOutbox


def event(change: Change, sequence: int, now: float) -> dict[str, Any]:
    return {"queue": change.queue, "stopped": change.flow_stopped, "sequence": sequence}


def outbox_at(path: Path) -> WebhookOutbox:
    return WebhookOutbox(Store(path / "db.sqlite3"), event, clock=lambda: 100.0)


def change(queue: str, stopped: bool, version: int = 1) -> Change:
    return Change("/", queue, version, stopped)


def test_rows_per_matching_enabled_subscription_with_a_shared_queue_sequence(
        tmp_path: Path) -> None:
    outbox = outbox_at(tmp_path)
    every = outbox.create(url="http://127.0.0.1:9/a", secret="s", vhost="*", queue="*")
    orders = outbox.create(url="http://127.0.0.1:9/b", secret="s", vhost="/", queue="orders*")
    off = outbox.create(url="http://127.0.0.1:9/c", secret="s", vhost="*", queue="*")
    outbox.set_enabled(off.id, False, "test")
    for stopped in (True, False, True):
        outbox.on_change(change("orders", stopped))
    outbox.on_change(change("audit", True))

    rows = {s.id: list(reversed(outbox.deliveries(s.id, 10))) for s in (every, orders, off)}
    assert [(r.queue, r.sequence) for r in rows[every.id]] == [
        ("orders", 1), ("orders", 2), ("orders", 3), ("audit", 1)]
    assert [(r.queue, r.sequence) for r in rows[orders.id]] == [
        ("orders", 1), ("orders", 2), ("orders", 3)]
    assert rows[off.id] == []
    ids = [r.msg_id for rs in rows.values() for r in rs]
    assert len(set(ids)) == len(ids) == 7
    assert rows[every.id][0].body == rows[orders.id][0].body  # one event, two deliveries
    assert outbox.outbox_depth() == 7 and outbox.changed.is_set()


def test_sequence_and_rows_survive_a_restart(tmp_path: Path) -> None:
    outbox = outbox_at(tmp_path)
    sub = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    outbox.on_change(change("orders", True))
    outbox.store.close()

    again = outbox_at(tmp_path)
    assert again.get(sub.id) == sub
    again.on_change(change("orders", False))
    assert [r.sequence for r in again.deliveries(sub.id, 10)] == [2, 1]


def test_only_the_oldest_pending_row_of_each_stream_is_a_head(tmp_path: Path) -> None:
    outbox = outbox_at(tmp_path)
    sub = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    for queue in ("a", "a", "a", "b"):
        outbox.on_change(change(queue, True))
    heads = outbox.heads()
    assert sorted((r.queue, r.sequence) for r in heads) == [("a", 1), ("b", 1)]

    first_a = next(r for r in heads if r.queue == "a")
    outbox.record(first_a, Outcome.RETRY, at=101.0, http_status=500, error="HTTP 500",
                  next_attempt_at=105.0)
    retried = next(r for r in outbox.heads() if r.queue == "a")
    assert (retried.sequence, retried.attempts, retried.next_attempt_at) == (1, 1, 105.0)
    assert (retried.last_status, retried.last_error) == (500, "HTTP 500")

    outbox.record(retried, Outcome.FAILED, at=106.0, http_status=None, error="refused")
    outbox.record(next(r for r in outbox.heads() if r.queue == "a"), Outcome.DELIVERED,
                  at=107.0, http_status=204, error=None)
    assert sorted((r.queue, r.sequence) for r in outbox.heads()) == [("a", 3), ("b", 1)]
    statuses = [(r.sequence, r.status, r.delivered_at) for r in
                reversed(outbox.deliveries(sub.id, 10)) if r.queue == "a"]
    assert statuses == [(1, FAILED, None), (2, DELIVERED, 107.0), (3, PENDING, None)]
    assert outbox.failures_total() == 2
    assert outbox.status_counts() == {sub.id: {PENDING: 2, FAILED: 1, DELIVERED: 1}}


def test_410_disables_and_keeps_the_row_for_re_enabling(tmp_path: Path) -> None:
    outbox = outbox_at(tmp_path)
    sub = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    outbox.on_change(change("a", True))
    outbox.record(outbox.heads()[0], Outcome.GONE, at=101.0, http_status=410, error="HTTP 410")
    gone = outbox.get(sub.id)
    assert gone is not None and not gone.enabled and "410" in (gone.disabled_reason or "")
    assert outbox.heads() == []
    outbox.on_change(change("a", False))  # disabled: nothing new is queued
    assert outbox.outbox_depth() == 1

    outbox.set_enabled(sub.id, True)
    assert [(r.sequence, r.attempts, r.last_status) for r in outbox.heads()] == [(1, 1, 410)]
    outbox.on_change(change("a", True))
    assert [r.sequence for r in outbox.deliveries(sub.id, 10)] == [3, 1], \
        "the change missed while disabled leaves a gap the receiver can see"


def test_delete_and_prune_drop_rows(tmp_path: Path) -> None:
    outbox = outbox_at(tmp_path)
    keep = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    drop = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    outbox.on_change(change("a", True))
    outbox.on_change(change("a", False))
    outbox.record(outbox.deliveries(keep.id, 10)[-1], Outcome.DELIVERED, at=150.0,
                  http_status=200, error=None)
    assert outbox.delete(drop.id) and not outbox.delete(drop.id)
    assert outbox.get(drop.id) is None and outbox.deliveries(drop.id, 10) == []
    assert outbox.prune(before=150.0) == 0
    assert outbox.prune(before=151.0) == 1  # the delivered row; the pending one stays
    assert [r.sequence for r in outbox.deliveries(keep.id, 10)] == [2]


def test_engine_transitions_reach_the_outbox_in_the_same_commit(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    engine = FlowEngine(store, DefaultPolicy(), stale_after=10.0)
    outbox = WebhookOutbox(store, event)
    engine.store_listeners.append(outbox.on_change)
    sub = outbox.create(url="http://127.0.0.1:9/", secret="s", vhost="*", queue="*")
    args = {"qpid.flow_stop_count": 3, "qpid.flow_resume_count": 2}
    for depth in (4, 3, 1, 5):
        engine.apply_poll([QueueInfo("/", "q", depth, 0, arguments=args)], now=1.0)
    store.close()

    reopened = outbox_at(tmp_path)
    rows = list(reversed(reopened.deliveries(sub.id, 10)))
    assert [(r.sequence, r.body) for r in rows] == [
        (1, b'{"queue":"q","stopped":true,"sequence":1}'),
        (2, b'{"queue":"q","stopped":false,"sequence":2}'),
        (3, b'{"queue":"q","stopped":true,"sequence":3}')]
