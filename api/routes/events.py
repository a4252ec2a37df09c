"""`GET /events`: a Server-Sent-Events stream of flow changes for one queue, a list, or all.

Each event is one change of what producers are told, with the queue's new `version`
and its `flowStoppedCount` as of that change. A client that reconnects with
`Last-Event-ID` gets what it missed replayed; when that is impossible (the sidecar
restarted, or it was away too long) it gets
a `snapshot` event per queue instead, so it never acts on a state it did not see.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from fnmatch import fnmatchcase
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from api.answers import stopped_by
from api.deps import EngineDep, HubDep
from sidecar.flow.engine import FlowEngine
from sidecar.model import QueueKey
from sidecar.signals.change_fanout import ChangeHub, Matcher
from sidecar.signals.event_json import change_json

router = APIRouter(tags=["flow"])
KEEPALIVE = 15.0


def matcher(vhost: str | None, queues: list[str], name: str | None) -> Matcher:
    """Queues a stream wants: exact names and/or a glob, optionally in one vhost."""
    wanted = set(queues)

    def matches(key: QueueKey) -> bool:
        if vhost is not None and key[0] != vhost:
            return False
        if not wanted and name is None:
            return True
        return key[1] in wanted or (name is not None and fnmatchcase(key[1], name))

    return matches


def _frame(event: str, event_id: str, data: dict[str, Any]) -> str:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event_id}\nevent: {event}\ndata: {body}\n\n"


async def _events(engine: FlowEngine, hub: ChangeHub, matches: Matcher,
                  last_event_id: str | None) -> AsyncIterator[str]:
    stream = hub.subscribe(matches)  # before the snapshot: nothing falls in between
    try:
        start = hub.seq
        replay = hub.missed(last_event_id, matches)
        if replay is None:
            for entry in sorted((e for e in engine.entries() if matches(e.key)),
                                key=lambda e: e.key):
                key = entry.key
                yield _frame("snapshot", hub.event_id(start), {
                    "vhost": key[0], "queue": key[1], "flowStopped": entry.told_stopped,
                    "version": entry.version, "flowStoppedCount": entry.state.stopped_count,
                    "flowStoppedBy": stopped_by(entry.stop_reasons)})
        else:
            for seq, change in replay:
                yield _frame("flow", hub.event_id(seq), change_json(change))
        yield ": ready\n\n"
        while not (stream.overflowed and stream.queue.empty()):
            try:
                async with asyncio.timeout(KEEPALIVE):  # not wait_for: see webhook_delivery
                    seq, change = await stream.queue.get()
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if seq > start:
                yield _frame("flow", hub.event_id(seq), change_json(change))
    finally:
        hub.unsubscribe(stream)


@router.get("/events", response_class=StreamingResponse, responses={
    200: {"content": {"text/event-stream": {}}, "description": "flow changes as SSE"}})
async def events(
    engine: EngineDep,
    hub: HubDep,
    queue: Annotated[list[str], Query(description="queue names (repeat for a list)")] = [],  # noqa: B006
    name: Annotated[str | None, Query(description="queue name glob")] = None,
    vhost: Annotated[str | None, Query(description="only this vhost")] = None,
    last_event_id: Annotated[str | None, Header(description="resume after this id")] = None,
) -> StreamingResponse:
    """Stream flow changes; all queues unless `queue`, `name` or `vhost` narrow it."""
    return StreamingResponse(
        _events(engine, hub, matcher(vhost, queue, name), last_event_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
