"""ASGI front door: serves plain `GET /flow/...` from memory, before FastAPI's routing.

Every producer polls `/flow`; routing, dependency injection and response-model
validation cost more than the answer itself. For a GET without a query string on a queue
the engine knows, this middleware writes the cached bytes directly (noting the producer's
`X-Producer-Id`/`X-Producer-Capacity` when given). Anything else (long polls, unknown
queues, bad encodings or headers, every other route) goes on to FastAPI with
`scope["path"]` set to the raw, still percent-encoded path; see `api.path_segments`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.answers import Answers
from api.path_segments import BadPath, decode_segment

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
MAX_PRODUCER_ID = 200


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


def producer_headers(scope: Scope) -> tuple[str | None, int] | None:
    """(producer id or None, capacity); None when a header is malformed (FastAPI then
    answers with the 422 that names it, so both paths judge headers alike)."""
    producer: str | None = None
    capacity: bytes | None = None
    for name, value in scope["headers"]:  # the first of repeated headers, as FastAPI does
        if name == b"x-producer-id" and producer is None:
            producer = value.decode("latin-1")
        elif name == b"x-producer-capacity" and capacity is None:
            capacity = value
    capacity = b"0" if capacity is None else capacity
    if not capacity.isdigit() or len(capacity) > 9:
        return None
    if producer is None:
        return None, 0
    if not 0 < len(producer) <= MAX_PRODUCER_ID:
        return None
    return producer, int(capacity)


class FastPath:
    """Wraps the FastAPI app; see the module docstring."""

    def __init__(self, app: ASGIApp, answers: Answers) -> None:
        self.app = app
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw is not None:
                path = raw.decode("latin-1")
                if (
                    scope["method"] == "GET"
                    and not scope["query_string"]
                    and path.startswith("/flow/")
                    and await self._answer(scope, path, send)
                ):
                    return
                scope = dict(scope, path=path)
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, path: str, send: Send) -> bool:
        key = flow_key(path)
        entry = self.answers.engine.entry(key) if key else None
        producer = producer_headers(scope) if entry else None
        if entry is None or producer is None:
            return False
        if producer[0] is not None:
            self.answers.record_producer(entry, producer[0], producer[1], time.time())
        body = self.answers.flow_body(entry)
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
        return True
