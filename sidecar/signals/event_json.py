"""The JSON shapes of a flow change that leave the sidecar: SSE events and webhook payloads,
and those of a warning episode's start and end.

Both carry the same fields (`change_json`) so a consumer can switch between them; the
webhook payload adds the depth and thresholds of the moment. Times are UTC ISO-8601 to
the millisecond with a `Z`, as in every API answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from sidecar.flow.fill_rate import WarningKind
from sidecar.flow.forecast import WarningNote, shown_rate, shown_seconds
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.thresholds import COUNT, SIZE, Resolution, Source
from sidecar.model import Change, QueueKey


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


def sse_frame(event: str, event_id: str, data: dict[str, Any]) -> bytes:
    """One Server-Sent Event: its id, its type and its data as compact JSON."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event_id}\nevent: {event}\ndata: {body}\n\n".encode()


def change_json(change: Change) -> dict[str, Any]:
    """A change of what producers are told, as it happened (SSE events, webhook data)."""
    return {
        "vhost": change.vhost, "queue": change.queue, "flowStopped": change.flow_stopped,
        "version": change.version, "flowStoppedCount": change.stopped_count,
        "transition": str(change.event.kind) if change.event else None,
        "reason": change.reason, "flowStoppedBy": list(change.stopped_by),
    }


def warning_json(note: WarningNote) -> dict[str, Any]:
    """A warning episode that started or ended (SSE data, webhook data): the queue, the
    episode (numbered per queue from 1, across restarts and alike on every replica), when
    it started, and what the queue showed at the verdict (docs/graded-flow.md)."""
    fill = note.fill_rate
    return {
        "vhost": note.key[0], "queue": note.key[1], "warning": note.event.kind is
        WarningKind.STARTED, "episode": note.event.episode,
        "startedAt": iso(note.event.started_at), "at": iso(note.event.at),
        "depth": None if note.depth is None else {"messages": note.depth.messages,
                                                  "bytes": note.depth.bytes},
        "fillRate": shown_rate(fill), "secondsToStop": shown_seconds(note.seconds_to_stop),
    }


def warning_type(note: WarningNote) -> str:
    """`flow.warning` when an episode starts, `flow.warning-cleared` when it ends (the SSE
    event name and the webhook type alike)."""
    return f"flow.{note.event.kind}"


def webhook_warning(note: WarningNote, sequence: int, now: float) -> dict[str, Any]:
    """The JSON a receiver that asked for warnings gets for one episode's start or end;
    `sequence` is that of the queue's last flow event (warnings take no number of their
    own, so subscriptions without them see no gap)."""
    return {"type": warning_type(note), "timestamp": iso(now),
            "data": {**warning_json(note), "sequence": sequence}}


def webhook_event(entry_of: Callable[[QueueKey], QueueEntry | None], change: Change,
                  sequence: int, now: float) -> dict[str, Any]:
    """The JSON a receiver gets for one change (the outbox's event builder). The queue may
    be gone already (deleted queues resume): then depth and thresholds are null."""
    entry = entry_of((change.vhost, change.queue))
    event = change.event
    depth = event.depth if event else entry.depth if entry else None
    return {
        "type": "flow.stopped" if change.flow_stopped else "flow.resumed",
        "timestamp": iso(now),
        "data": {
            **change_json(change),
            "depth": None if depth is None else {"messages": depth.messages,
                                                 "bytes": depth.bytes},
            "thresholds": thresholds_json(entry.resolution) if entry else None,
            "sequence": sequence,
        },
    }
