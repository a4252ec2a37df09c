"""ASGI front door: serves plain `GET /flow/...` from memory, before FastAPI's routing.

Every producer polls `/flow`; routing, dependency injection and response-model
validation cost more than the answer itself. For a GET without a query string on a queue
the engine knows, this middleware writes the cached bytes directly. Anything else (long
polls, unknown queues, bad encodings, every other route) goes on to FastAPI with
`scope["path"]` set to the raw, still percent-encoded path; see `api.paths`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.paths import BadPath, decode_segment
from api.views import flow_body
from sidecar.engine import FlowEngine

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


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


class FastPath:
    """Wraps the FastAPI app; see the module docstring."""

    def __init__(self, app: ASGIApp, engine: FlowEngine) -> None:
        self.app = app
        self.engine = engine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw is not None:
                path = raw.decode("latin-1")
                if (
                    scope["method"] == "GET"
                    and not scope["query_string"]
                    and path.startswith("/flow/")
                    and await self._answer(path, send)
                ):
                    return
                scope = dict(scope, path=path)
        await self.app(scope, receive, send)

    async def _answer(self, path: str, send: Send) -> bool:
        key = flow_key(path)
        entry = self.engine.queues.get(key) if key else None
        if entry is None:
            return False
        body = flow_body(self.engine, entry)
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
        return True
