"""ASGI front door: serves `GET /flow/...` from memory, before FastAPI's routing.

Every producer polls `/flow`; routing, dependency injection and response-model
validation cost more than the answer itself. For a GET on a queue the engine knows,
without a query string or with only a long-poll's `since` and `wait`, this middleware
writes the cached bytes directly (noting the producer's `X-Producer-Id`/
`X-Producer-Capacity` when given). A long poll parks here too, in `api.edge.parked_polls`: a
transition writes the same answer to all of a queue's parked connections in one loop, not
a pass through FastAPI for each (which made the last of 1,000 wait over a second), nor a
coroutine step and two ASGI sends for each (the last of 10,000 waited a second). Without
direct access to the connection (`api.edge.direct_writes`), it waits in `ChangeHub.long_poll`
and answers through `send`. Anything else
(unknown queues, bad encodings, headers or parameters, every other route) goes on to
FastAPI with `scope["path"]` set to the raw, still percent-encoded path; see
`api.path_segments`. Both paths judge requests alike: what this one does not accept, the
route answers, with the 4xx that names the field.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from api.answers import Answers
from api.edge.direct_writes import DirectSwitch, link_of, stopping
from api.edge.parked_polls import ParkedPolls
from api.edge.protocol import FLOW_HEADERS, flow_key, long_poll_query, producer_headers
from api.producer_guard import ProducerGuard
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.signals.change_fanout import ChangeHub


class FastPath:
    """Wraps the FastAPI app; see the module docstring."""

    def __init__(self, app: ASGIApp, answers: Answers, guard: ProducerGuard,
                 hub: ChangeHub, parked: ParkedPolls, switch: DirectSwitch) -> None:
        self.app = app
        self.switch = switch
        self.answers = answers
        self.guard = guard
        self.hub = hub
        self.parked = parked

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw is not None:
                path = raw.decode("latin-1")
                if (
                    scope["method"] == "GET"
                    and path.startswith("/flow/")
                    and await self._answer(scope, path, send)
                ):
                    return
                scope = dict(scope, path=path)
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, path: str, send: Send) -> bool:
        query = scope["query_string"]
        poll = long_poll_query(query) if query else None
        if query and poll is None:
            return False
        key = flow_key(path)
        entry = self.answers.engine.entry(key) if key else None
        producer = producer_headers(scope) if entry else None
        if entry is None or producer is None:
            return False
        producer_id, capacity, capacity_bytes, producer_class, published = producer
        if producer_id is not None and self.guard.active:
            return False  # the route checks who may speak for it
        asked_at = time.time()
        if producer_id is not None:  # dated when asked, not when a long poll answers
            self.answers.record_report(entry.key, producer_id, published, asked_at,
                                       producer_class)
        if poll is not None:
            since, wait = poll
            link = link_of(scope) if self.switch.on else None
            cycle = None if link is None else link.cycle()
            if link is None or cycle is None:
                with stopping(scope) as until:
                    found = await self._wait_for_change(entry, since, wait, until)
            elif since is None or since == entry.version:
                if await self.parked.wait(entry.key, link, cycle, producer, asked_at, wait):
                    return True  # answered by the wake-up
                found = self.answers.engine.entry(entry.key)
            else:
                found = entry  # changed since: at once
            if found is None:
                return False  # gone while waiting: the route answers why (404)
            entry = found
        now = asked_at if poll is None else time.time()  # no wait between: one reading
        if producer_id is not None:
            self.answers.record_producer(entry, producer_id, capacity, now,
                                         capacity_bytes=capacity_bytes,
                                         asked_at=asked_at if poll else None,
                                         producer_class=producer_class)
        body = self.answers.producer_body(entry, producer_id, now, producer_class)
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [*FLOW_HEADERS, (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
        return True

    async def _wait_for_change(self, entry: QueueEntry, since: int | None, wait: float,
                               until: asyncio.Future[None] | None) -> QueueEntry | None:
        """The queue's entry once its version is no longer `since` (without it, the
        version now), or when `wait` seconds have passed; None if the queue disappeared
        meanwhile."""
        engine, key = self.answers.engine, entry.key

        async def read() -> tuple[QueueEntry | None, int, list[QueueKey]]:
            current = engine.entry(key)  # gone: no version, so the wait ends
            return current, -1 if current is None else current.version, [key]

        return await self.hub.long_poll(read, since, wait, until=until)
