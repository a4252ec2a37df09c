"""ASGI front door: serves `GET /flow/...` from memory, before FastAPI's routing.

Every producer polls `/flow`; routing, dependency injection and response-model
validation cost more than the answer itself. For a GET on a queue the engine knows,
without a query string or with only a long-poll's `since` and `wait`, this middleware
writes the cached bytes directly (noting the producer's `X-Producer-Id`/
`X-Producer-Capacity` when given). A long poll parks here too, in `api.parked_polls`: a
transition writes the same answer to all of a queue's parked connections in one loop, not
a pass through FastAPI for each (which made the last of 1,000 wait over a second), nor a
coroutine step and two ASGI sends for each (the last of 10,000 waited a second). Without
direct access to the connection (`api.direct_writes`), it waits in `ChangeHub.long_poll`
and answers through `send`. Anything else
(unknown queues, bad encodings, headers or parameters, every other route) goes on to
FastAPI with `scope["path"]` set to the raw, still percent-encoded path; see
`api.path_segments`. Both paths judge requests alike: what this one does not accept, the
route answers, with the 4xx that names the field.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from api.answers import Answers
from api.direct_writes import DirectSwitch, link_of, stopping
from api.parked_polls import FLOW_HEADERS, Declared, ParkedPolls
from api.path_segments import BadPath, decode_segment
from sidecar.signals.change_fanout import ChangeHub

if TYPE_CHECKING:  # api.producer_guard imports api.guards, which imports this module
    from api.producer_guard import ProducerGuard
    from sidecar.flow.queue_entry import QueueEntry
    from sidecar.model import QueueKey

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_PRODUCER_ID = 200
CAPACITY_DIGITS, CAPACITY_BYTES_DIGITS = 9, 18  # X-Producer-Capacity(-Bytes)
MAX_CAPACITY = 10**CAPACITY_DIGITS - 1
MAX_CAPACITY_BYTES = 10**CAPACITY_BYTES_DIGITS - 1
MAX_WAIT = 300.0  # seconds a long poll may wait
VERSION_DIGITS = 18


_ANONYMOUS: Declared = (None, 0, None)  # a request without X-Producer-Id
_PRODUCER_HEADERS = frozenset((b"x-producer-id", b"x-producer-capacity",
                               b"x-producer-capacity-bytes"))


def flow_key(path: str) -> tuple[str, str] | None:
    """(vhost, queue) of `/flow/{queue}` or `/flow/{vhost}/{queue}`; None otherwise."""
    parts = path[len("/flow/"):].split("/")
    try:
        if len(parts) == 1:
            return "/", decode_segment(parts[0], "queue")
        if len(parts) == 2:
            return decode_segment(parts[0], "vhost"), decode_segment(parts[1], "queue")
    except BadPath:
        return None
    return None


def producer_headers(scope: Scope) -> Declared | None:
    """The producer's id (or None), capacity and byte capacity; None when a header is
    malformed (FastAPI then answers with the 422 that names it, so both paths judge
    headers alike). Integers are ASCII digits only here: FastAPI would also take '+5' or
    ' 5', which producers do not send; those requests go on to it."""
    producer: bytes | None = None
    capacity = capacity_bytes = None
    for name, value in scope["headers"]:  # the first of repeated headers, as FastAPI does
        if name in _PRODUCER_HEADERS:
            if name == b"x-producer-id":
                producer = value if producer is None else producer
            elif name == b"x-producer-capacity":
                capacity = value if capacity is None else capacity
            elif capacity_bytes is None:
                capacity_bytes = value
    if producer is None and capacity is None and capacity_bytes is None:
        return _ANONYMOUS
    if capacity is not None and not (capacity.isdigit() and len(capacity) <= CAPACITY_DIGITS):
        return None
    if capacity_bytes is not None and not (
            capacity_bytes.isdigit() and len(capacity_bytes) <= CAPACITY_BYTES_DIGITS):
        return None
    if producer is None:
        return _ANONYMOUS
    if not 0 < len(producer) <= MAX_PRODUCER_ID:
        return None
    return (producer.decode("latin-1"), 0 if capacity is None else int(capacity),
            None if capacity_bytes is None else int(capacity_bytes))


def long_poll_query(query: bytes) -> tuple[int | None, float] | None:
    """(since, wait) of a query holding only `wait` (0 < wait <= 300 s) and optionally
    `since` (a version), each once and plainly written; None for anything else, which the
    route then judges (and refuses with the 422 that names the field)."""
    since: int | None = None
    wait: float | None = None
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"since" and since is None and value.isdigit() \
                and len(value) <= VERSION_DIGITS:
            since = int(value)
        elif name == b"wait" and wait is None and value.replace(b".", b"", 1).isdigit():
            wait = float(value)
        else:
            return None
    if wait is None or not 0 < wait <= MAX_WAIT:
        return None
    return since, wait


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
        producer_id, capacity, capacity_bytes = producer
        if producer_id is not None and self.guard.active:
            return False  # the route checks who may speak for it
        asked_at = time.time()
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
        if producer_id is not None:
            self.answers.record_producer(entry, producer_id, capacity, time.time(),
                                         capacity_bytes=capacity_bytes,
                                         asked_at=asked_at if poll else None)
        body = self.answers.flow_body(entry)
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
