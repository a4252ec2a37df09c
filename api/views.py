"""The JSON answers of `GET /flow/...` and `GET /queues/...`, built from the engine's table.

`flow_body` caches the encoded answer on the queue entry until the engine changes it
(a new sample, a transition, a threshold change, staleness), so the hot path is a dict
lookup and a bytes write.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sidecar.engine import Change, FlowEngine, QueueEntry
from sidecar.producers import ProducerRegistry, overflow_risk
from sidecar.store import QueueKey
from sidecar.thresholds import COUNT, FLOW_KEYS, SIZE, Resolution, Source


def iso(ts: float | None) -> str | None:
    """UTC ISO-8601 with a Z, to the millisecond."""
    if ts is None:
        return None
    stamp = datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def thresholds_json(resolution: Resolution) -> dict[str, int | None]:
    """The four qpid.flow_* values in effect; 0 for a disabled dimension, null for none."""
    out: dict[str, int | None] = {}
    for dim, level, source in (
        (COUNT, resolution.thresholds.count, resolution.count_source),
        (SIZE, resolution.thresholds.size, resolution.size_source),
    ):
        if source is Source.DISABLED:
            out[dim.stop_key], out[dim.resume_key] = 0, 0
        elif level is None:
            out[dim.stop_key], out[dim.resume_key] = None, None
        else:
            out[dim.stop_key], out[dim.resume_key] = level.stop, level.resume
    return out


def change_json(change: Change) -> dict[str, Any]:
    """A change of what producers are told, as it happened (SSE events, webhook data)."""
    return {
        "vhost": change.vhost, "queue": change.queue, "flowStopped": change.flow_stopped,
        "version": change.version, "flowStoppedCount": change.stopped_count,
        "transition": str(change.event.kind) if change.event else None,
        "reason": change.reason,
    }


def producers_json(producers: ProducerRegistry, entry: QueueEntry) -> dict[str, Any]:
    """Active producers and the seed's capacity-window check (`overflowRisk`)."""
    capacity = producers.capacity(entry.key)
    count = entry.resolution.thresholds.count
    rate = entry.info.publish_rate
    risk = overflow_risk(count.stop if count else None, capacity,
                         producers.during_reaction(rate), entry.limits.max_length)
    return {
        "producers": {"active": len(producers.active(entry.key)), "capacity": capacity,
                      "publishRate": rate},
        "overflowRisk": risk is not None,
        "overflowRiskDetail": risk.describe() if risk else None,
    }


def producer_list(producers: ProducerRegistry, key: QueueKey) -> list[dict[str, Any]]:
    """Each active producer of a queue: its capacity, when it last asked, what it was told.
    Not part of `/flow` answers, which are cached while last-seen times move on."""
    return [{"id": producer_id, "capacity": p.capacity, "lastSeenAt": iso(p.last_seen),
             "toldStopped": p.told_stopped}
            for producer_id, p in sorted(producers.active(key).items())]


def queue_view(engine: FlowEngine, entry: QueueEntry,
               producers: ProducerRegistry) -> dict[str, Any]:
    """Everything a producer or operator needs about one queue the broker reports."""
    res = entry.resolution
    return {
        "vhost": entry.vhost,
        "queue": entry.name,
        "exists": True,
        "flowStopped": entry.told_stopped,
        "flowStoppedCount": entry.state.stopped_count,
        "measuredFlowStopped": entry.state.stopped,
        "depth": None if entry.depth is None else {
            "messages": entry.depth.messages, "bytes": entry.depth.bytes},
        "thresholds": thresholds_json(res),
        "sources": {"count": str(res.count_source), "size": str(res.size_source)},
        "limits": entry.limits.as_json(),
        "configErrors": list(res.errors),
        "configWarnings": list(res.warnings),
        "sampledAt": iso(entry.sampled_at),
        "stale": entry.stale,
        "onStale": engine.on_stale,
        "lastTransitionAt": iso(entry.last_transition_at),
        **producers_json(producers, entry),
        "version": entry.version,
    }


def settings_json(engine: FlowEngine, key: QueueKey) -> dict[str, int | None]:
    """The stored API settings of a queue, all four keys (null = not set)."""
    stored = engine.settings.get(key, {})
    return {k: stored.get(k) for k in FLOW_KEYS}


def full_view(engine: FlowEngine, key: QueueKey,
              producers: ProducerRegistry) -> dict[str, Any] | None:
    """`/queues` item: the flow view plus stored settings; also for queues that do not
    exist yet but have settings waiting for them. None when neither is known."""
    entry = engine.queues.get(key)
    if entry is not None:
        view = queue_view(engine, entry, producers)
    elif key in engine.settings:
        view = {
            "vhost": key[0], "queue": key[1], "exists": False, "flowStopped": False,
            "flowStoppedCount": engine.stored_count(key), "depth": None,
            "thresholds": None, "sources": None, "sampledAt": None, "stale": True,
        }
    else:
        return None
    view["settings"] = settings_json(engine, key)
    return view


def flow_body(engine: FlowEngine, entry: QueueEntry, producers: ProducerRegistry) -> bytes:
    """The encoded `GET /flow` answer, cached until the entry changes."""
    body = entry.cached_body
    if body is None:
        body = json.dumps(queue_view(engine, entry, producers), ensure_ascii=False,
                          separators=(",", ":")).encode()
        entry.cached_body = body
    return body


def record_producer(producers: ProducerRegistry, entry: QueueEntry, producer_id: str,
                    capacity: int, now: float) -> None:
    """Note which producer was told what; a new producer or capacity changes the answer."""
    if producers.seen(entry.key, producer_id, capacity, entry.told_stopped, now):
        entry.cached_body = None
