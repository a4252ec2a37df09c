"""`GET /events`: a Server-Sent-Events stream of flow changes for one queue, a list, or all.

Each event is one change of what producers are told, with the queue's new `version`
and its `flowStoppedCount` as of that change; with `warnings=true`, also each start and
end of a queue's warning episode (`flow.warning`, `flow.warning-cleared`). A client that reconnects with
`Last-Event-ID` gets what it missed replayed; when that is impossible (the sidecar
restarted, or it was away too long) it gets
a `snapshot` event per queue instead, so it never acts on a state it did not see.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from api.answers import stopped_by
from api.deps import EngineDep, HubDep
from api.edge.direct_writes import ChunkWriter, drop_if_stalled, link_of
from api.edge.stream_writes import StreamWrites
from api.name_filter_worker import FilterBusy, NameFilterWorker
from api.schemas import Problem
from sidecar.flow.engine import FlowEngine
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.name_patterns import NameTest, PatternError, encoded, glob_test
from sidecar.signals.change_fanout import ChangeHub, Stream
from sidecar.signals.event_json import sse_frame

router = APIRouter(tags=["flow"])
KEEPALIVE = 15.0
MAX_SEEN = 50_000  # queue names a glob filter remembers the verdict of


@dataclass(frozen=True)
class QueueFilter:
    """Queues a stream wants: exact names and/or a glob, optionally in one vhost. Equal
    filters are one key of the hub's (`ChangeHub.subscribe`): 10,000 streams asking the
    same cost one call of it a change. The glob is matched by RE2 once per queue name and
    remembered (`seen`): the names of the moment are matched off the event loop when the
    stream starts (`events`), a name that appears later on its first change."""

    vhost: str | None
    names: frozenset[str]
    glob: str | None
    warnings: bool = False  # also warning episodes: a filter of its own (`subscribe`)
    seen: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)
    test: NameTest | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.glob is not None:  # a PatternError is the route's 400
            object.__setattr__(self, "test", glob_test(self.glob, "name"))

    def __call__(self, key: QueueKey) -> bool:
        if self.vhost is not None and key[0] != self.vhost:
            return False
        if not self.names and self.glob is None:
            return True
        return key[1] in self.names or (self.test is not None and self._passes(key[1], self.test))

    def _passes(self, name: str, test: NameTest) -> bool:
        known = self.seen.get(name)
        if known is None:
            if len(self.seen) >= MAX_SEEN:  # names that came and went: start again
                self.seen.clear()
            known = self.seen[name] = test(encoded(name))
        return known

    @property
    def named_only(self) -> frozenset[str]:
        """The only queue names it can let through, when it names them (no glob): the hub
        asks it only about changes of those; empty: any name."""
        return self.names if self.glob is None else frozenset()

    def wanted(self, engine: FlowEngine) -> list[QueueEntry]:
        """The queues it wants now, by key: looked up by name when it names them (the
        snapshot of a stream of one queue walked every queue at each connect:
        docs/benchmarks.md#change-fanout)."""
        if self.named_only:
            vhosts = [self.vhost] if self.vhost is not None else engine.vhost_queue_counts()
            found = (engine.entry((vhost, name)) for vhost in vhosts for name in self.names)
            return sorted((e for e in found if e is not None), key=lambda e: e.key)
        return sorted((e for e in engine.entries() if self(e.key)), key=lambda e: e.key)


class EventStream(StreamingResponse):
    """The stream itself, sent with bare ASGI messages: a change's event is encoded once
    by the hub (`ChangeHub.frame`) and the same bytes go to every stream. Once the stream
    has sent what it had queued, and the server lets it (`api.edge.direct_writes`), the hub
    writes events straight to its connection instead of waking it; this coroutine then
    only sends keep-alives and ends the stream. A task per stream waits for the client to
    leave and ends the stream then."""

    def __init__(self, engine: FlowEngine, hub: ChangeHub, writes: StreamWrites,
                 matches: QueueFilter, last_event_id: str | None) -> None:
        super().__init__((), media_type="text/event-stream",
                         headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self.engine, self.hub, self.writes = engine, hub, writes
        self.matches, self.last_event_id = matches, last_event_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub = self.hub
        # subscribed before the snapshot: nothing falls in between
        stream = hub.subscribe(self.matches, self.matches.named_only, self.matches.warnings)
        gone = asyncio.get_running_loop().create_future()
        watcher = asyncio.create_task(self._until_gone(receive, stream, gone))
        link = link_of(scope)
        if link is not None:  # a graceful stop, or a client that stopped reading, ends it now
            stream.on_overflow = functools.partial(drop_if_stalled, link)
            link.on_end = functools.partial(self._end, stream, stream.on_overflow)
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            start = hub.seq
            await send(self._body(self._first_frames(start)))
            cycle = None if link is None else link.cycle()
            direct = None if cycle is None else ChunkWriter(cycle)
            while not gone.done() and not (stream.overflowed and stream.queue.empty()):
                if (stream.queue.empty() and not stream.claimed and direct is not None
                        and self.writes.switch.on):
                    self.writes.claim(stream, direct)  # from now on written directly
                try:
                    async with asyncio.timeout(KEEPALIVE):  # not wait_for: see webhook_delivery
                        item = await stream.queue.get()
                except TimeoutError:
                    await send(self._body(b": keep-alive\n\n"))
                    continue
                if item is not None and item[0] > start:
                    await send(self._body(hub.frame(*item)))
        finally:
            if link is not None:
                link.on_end = stream.on_overflow = None
            hub.unsubscribe(stream)
            self.writes.release(stream)
            watcher.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _first_frames(self, start: int) -> bytes:
        """A replay of what the client missed, else a snapshot of every queue it wants;
        then `: ready`."""
        hub, matches = self.hub, self.matches
        replay = hub.missed(self.last_event_id, matches)
        if replay is not None:
            frames = [hub.frame(seq, change) for seq, change in replay]
        else:
            frames = [sse_frame("snapshot", hub.event_id(start), {
                "vhost": e.key[0], "queue": e.key[1], "flowStopped": e.told_stopped,
                "version": e.version, "flowStoppedCount": e.state.stopped_count,
                "flowStoppedBy": stopped_by(e.stop_reasons)})
                for e in matches.wanted(self.engine)]
        return b"".join(frames) + b": ready\n\n"

    @staticmethod
    def _end(stream: Stream, drop_if_stalled: Callable[[], None]) -> None:
        """A graceful stop: no more events, what it has queued, then its end; at once when
        its client has stopped reading (its `send` would wait out the graceful timeout)."""
        stream.overflowed = True
        with contextlib.suppress(asyncio.QueueFull):
            stream.queue.put_nowait(None)
        drop_if_stalled()

    @staticmethod
    def _body(chunk: bytes) -> Message:
        return {"type": "http.response.body", "body": chunk, "more_body": True}

    @staticmethod
    async def _until_gone(receive: Receive, stream: Stream,
                          gone: asyncio.Future[None]) -> None:
        """Wake the stream (with None) once the client has left."""
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set_result(None)
        with contextlib.suppress(asyncio.QueueFull):  # full: the stream wakes anyway
            stream.queue.put_nowait(None)


@router.get("/events", response_class=StreamingResponse, responses={
    200: {"content": {"text/event-stream": {}}, "description": "flow changes as SSE"},
    400: {"model": Problem, "description": "`name` is a glob of over 255 characters, or "
                                           "takes over 0.5 s to match the queue names"},
    503: {"model": Problem, "description": "too many name patterns are waiting; retry"}})
async def events(
    request: Request,
    engine: EngineDep,
    hub: HubDep,
    queue: Annotated[list[str], Query(description="queue names (repeat for a list)")] = [],  # noqa: B006
    name: Annotated[str | None, Query(description=(
        "queue name glob (`*`, `?`, `[...]`; case-sensitive, the whole name; at most 255 "
        "characters)"))] = None,
    vhost: Annotated[str | None, Query(description="only this vhost")] = None,
    warnings: Annotated[bool, Query(description=(
        "also `flow.warning` and `flow.warning-cleared` events: a queue's warning "
        "episode started or ended (docs/graded-flow.md)"))] = False,
    last_event_id: Annotated[str | None, Header(description="resume after this id")] = None,
) -> StreamingResponse:
    """Stream flow changes; all queues unless `queue`, `name` or `vhost` narrow it."""
    try:
        matches = QueueFilter(vhost, frozenset(queue), name, warnings)
        if name is not None:
            worker: NameFilterWorker = request.app.state.name_filters
            names = list({e.key[1] for e in engine.entries()
                          if vhost is None or e.key[0] == vhost})
            passing = await worker.passing("glob", name, names)
            matches.seen.update((n, n in passing) for n in names)
    except PatternError as exc:
        raise HTTPException(400, exc.message) from None
    except FilterBusy as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
    return EventStream(engine, hub, request.app.state.stream_writes, matches, last_event_id)
