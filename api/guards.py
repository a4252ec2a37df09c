"""ASGI front guard: what every request must satisfy before any route (or the `/flow` fast
path) sees it.

- `Host` must be one of the sidecar's own (`api.hosts`): DNS rebinding. 400 otherwise.
- Writes (any method but GET, HEAD, OPTIONS):
  - an `Origin` that is not the sidecar's own is a page of another site: 403 unless the
    request carries the token (browsers cannot add it cross-site without CORS, which the
    sidecar does not grant);
  - a body must be JSON (`application/json` or `*/*+json`): a browser's "simple" request
    (text/plain, form encoding) from any page could otherwise write. 415 otherwise;
  - a body is read here, whole, before the route runs: at most `--max-body-bytes` (413
    beyond, at once when `Content-Length` says so), within `--body-timeout` (408 after);
    a client that goes away meanwhile is one throttled WARNING line, not a traceback. The
    route then parses at most that many bytes.

Refusals close the connection (its unread body is not worth reading). The hot path pays
one scan of the headers for `Host` and a dict lookup.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.hosts import HostPolicy
from api.schemas import Problem
from sidecar.config import Settings
from sidecar.records.throttled_log import ThrottledLog

READS = frozenset({"GET", "HEAD", "OPTIONS"})
log = ThrottledLog(logging.getLogger("flow_sidecar.http"))


def token_matches(given: str, token: SecretStr) -> bool:
    """Constant-time comparison of a presented token with the sidecar's."""
    return hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, given = (authorization or "").partition(" ")
    return given if scheme.lower() == "bearer" and given else None


def is_json(content_type: bytes) -> bool:
    """`application/json`, or any `type/subtype+json`, parameters ignored."""
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.endswith(b"+json") and b"/" in media)


def shown(value: bytes) -> str:
    """A header value quoted for an answer or a log line, cut to 100 characters."""
    text = value.decode("latin-1")
    return repr(text if len(text) <= 100 else text[:100] + "...")


class Refused(Exception):
    """A request the guard answers itself, with `status` and `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class ClientGone(Exception):
    """The client disconnected before its body was complete."""


class Guards:
    """Wraps the whole ASGI app; see the module docstring."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = HostPolicy(settings.host, settings.allowed_hosts)
        self.token = settings.token
        self.max_body = settings.max_body_bytes
        self.body_timeout = settings.body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = b""
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
                break
        if host and not self.hosts.allows(host):
            await answer(send, 400, f"Host {shown(host)} is not one of this sidecar's names: "
                                    "add it to --allowed-hosts if it is")
            return
        if scope["method"] in READS:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._write_body(scope, receive, host.decode("latin-1"))
        except Refused as refused:
            await answer(send, refused.status, refused.detail)
            return
        except ClientGone:
            log.note("client-gone", "a client went away while sending the body of %s %s",
                     scope["method"], shown(scope.get("raw_path", b"")))
            return
        await self.app(scope, receive if body is None else replay(body, receive), send)

    async def _write_body(self, scope: Scope, receive: Receive, host: str) -> bytes | None:
        """Check a write's origin and headers and read its body (None: it has none)."""
        headers = {name: value for name, value in scope["headers"]}
        origin = headers.get(b"origin")
        if origin is not None and not self.hosts.same_origin(
                origin.decode("latin-1"), host, scope.get("scheme", "http")):
            given = bearer(headers.get(b"authorization", b"").decode("latin-1"))
            if self.token is None or given is None or not token_matches(given, self.token):
                raise Refused(403, f"Origin {shown(origin)} is not this sidecar: "
                                   "cross-origin writes need the sidecar's token")
        length = headers.get(b"content-length")
        if length is None and b"transfer-encoding" not in headers:
            return None
        if length is not None:
            if not length.isdigit():
                raise Refused(400, "Content-Length must be a number of bytes")
            if int(length) == 0:
                return None
        content_type = headers.get(b"content-type", b"")
        if not is_json(content_type):
            got = shown(content_type) if content_type else "none"
            raise Refused(415, "a request body must be JSON: send 'Content-Type: "
                               f"application/json' (Content-Type was {got})")
        if length is not None and int(length) > self.max_body:
            raise self._too_large()
        return await self._read(receive)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        raise self._too_large()
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise Refused(408, f"the request body did not arrive within {self.body_timeout:g} s "
                               "(--body-timeout)") from None

    def _too_large(self) -> Refused:
        return Refused(413, f"the request body is larger than {self.max_body:,} bytes "
                            "(--max-body-bytes)")


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body read by the guard, then whatever comes next (a
    disconnect, which streaming answers watch for)."""
    given = False

    async def receive_again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive_again


async def answer(send: Send, status: int, detail: str) -> None:
    """A JSON problem answer that closes the connection."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


_EVERY_ROUTE = {"400": "the Host header is not one of this sidecar's names (--allowed-hosts), "
                       "or a name in the path is not percent-encoded UTF-8"}
_WRITES = {
    "403": "a cross-origin write without the token",
    "408": "the body did not arrive within --body-timeout",
    "413": "the body is larger than --max-body-bytes",
    "415": "the body is not JSON (Content-Type: application/json)",
}


# api.path_segments' rules, stated on every operation with a vhost, queue or exchange
NAMED_SEGMENTS = ("vhost", "queue", "exchange")
NAME_RULES = ("the Host header is not one of this sidecar's names (--allowed-hosts), or a "
              "name in the path no broker object can have: over 255 bytes of UTF-8, CR or "
              "LF in a queue or exchange name, or not percent-encoded UTF-8")


def document_guards(app: FastAPI) -> None:
    """Declare the guard's answers on every operation of the app's OpenAPI document (an
    operation's own description of a status wins)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = app.openapi_schema
        if schema is None:  # the first call: FastAPI generates (and keeps) the document
            schema = generate()
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.setdefault("Problem", Problem.model_json_schema())
            problem = {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            for path, operations in schema.get("paths", {}).items():
                for method, operation in operations.items():
                    answers = dict(_EVERY_ROUTE)
                    if method.upper() not in READS:
                        answers.update(_WRITES)
                    if any(f"{{{name}}}" in path for name in NAMED_SEGMENTS):
                        answers["400"] = NAME_RULES
                    for status, description in answers.items():
                        operation.setdefault("responses", {}).setdefault(
                            status, {"description": description, "content": problem})
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
