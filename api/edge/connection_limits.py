"""Connection limits for uvicorn: what a client may hold open without sending a request.

uvicorn closes a keep-alive connection idle between requests (`timeout_keep_alive`), and
answers 503 beyond `limit_concurrency` connections or tasks, but a connection that never
finishes its request headers stays open for ever: 2,000 idle sockets and 2,000 slowloris
ones (a header byte now and then) were all still open after 45 s. `guarded_protocol`
adds to uvicorn's httptools protocol:

- a header deadline: from the moment a connection opens, and again after each answer, the
  next request's headers must be complete within `header_timeout` seconds; then the
  connection is closed (with a 408 if part of a request had arrived). Once a request's
  headers are in, no deadline applies any more: a parked long-poll or an SSE stream is a
  legitimate long connection. The body has its own deadline in `api.guards`.
- a header size cap: headers of more than `max_header_bytes`, ended or not, are a 431.
- both again for a request pipelined behind one still being answered (a parked long poll,
  an SSE stream), from its first byte: then the connection is closed without an answer,
  as the one in progress cannot be followed by another.
- the running request learns that its connection is gone: uvicorn marks only the newest
  request of a connection disconnected, so a parked poll with a request pipelined behind
  it wrote to a closed transport (uvloop raises) and its task never ended.
- a graceful stop, or the connection's end, tells the running request (`Link.on_end`),
  so that a parked poll or stream answers (or ends) at once instead of being cancelled at
  the end of the grace period, or holding its task until its wait ends.
- the request's `Link` in its scope, so that a wake-up can write to it directly
  (`api.edge.direct_writes`).

`uvicorn_options` gathers these with uvicorn's own limits, from the settings;
`throttle_uvicorn_lines` keeps uvicorn's line per refused request from flooding the log.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from api.edge.direct_writes import EXTENSION, Link
from sidecar.config import Settings
from sidecar.records.throttled_log import ThrottledLines, ThrottledLog

MAX_HEADER_BYTES = 65536
log = ThrottledLog(logging.getLogger("flow_sidecar.http"))
_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
              b"connection: close\r\n\r\n")


def guarded_protocol(header_timeout: float,
                     max_header_bytes: int = MAX_HEADER_BYTES) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with a header deadline and a header size cap.

    A connection notes when it started waiting for headers (a float per request: a timer
    per request cost the `/flow` hot path about a tenth of its rate); one sweep per loop,
    every quarter of the timeout at most a second apart, closes those waiting too long."""

    sweep_every = min(1.0, header_timeout / 4)

    class GuardedHttpTools(HttpToolsProtocol):
        _waiting_since: float | None = None  # loop time it began waiting for headers
        _header_bytes = 0
        _tail = b""  # the last bytes counted, for an end of headers split between chunks
        _swept_loop: asyncio.AbstractEventLoop | None = None  # the loop a sweep runs on
        _running: RequestResponseCycle | None = None  # the request whose task runs now
        _began_in_chunk = False  # a pipelined request began in the chunk being parsed

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()
            if GuardedHttpTools._swept_loop is not self.loop:
                GuardedHttpTools._swept_loop = self.loop
                sweep(self.loop, self.connections)

        def data_received(self, data: bytes) -> None:
            if self._waiting_since is not None:  # counted before parsing: headers that
                seen = self._tail + data         # end in this very chunk count too
                end = seen.find(b"\r\n\r\n")
                size = self._header_bytes + (len(data) if end < 0
                                             else end + 4 - len(self._tail))
                if size > max_header_bytes:
                    self._refuse(_TOO_LARGE, "sent more than %d bytes of headers",
                                 max_header_bytes)
                    return
                self._header_bytes, self._tail = size, seen[-3:]
            self._began_in_chunk = False
            super().data_received(data)
            if self._began_in_chunk and self._waiting_since is not None:
                # its bytes in this chunk: those after the last request's headers
                end = data.rfind(b"\r\n\r\n")
                self._header_bytes = len(data) - (0 if end < 0 else end + 4)
                self._tail = data[-3:]
                if self._header_bytes > max_header_bytes:
                    self._refuse(_TOO_LARGE, "sent more than %d bytes of headers",
                                 max_header_bytes)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._waiting_since is None:  # pipelined behind one in progress
                self._await_headers()
                self._began_in_chunk = True

        def on_headers_complete(self) -> None:
            self._waiting_since = None
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.scope is self.scope:  # not an upgrade
                # api.edge.direct_writes; weak: the cycle holds the scope
                extensions: dict[str, Any] = {EXTENSION: Link(weakref.ref(self.cycle))}
                self.scope["extensions"] = extensions

        def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
            self._running = cycle
            super()._start_asgi_task(cycle, app)

        def on_response_complete(self) -> None:
            queued = bool(self.pipeline)  # a pipelined request already has its headers
            super().on_response_complete()
            if not queued and not self.transport.is_closing():
                self._await_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._waiting_since = None
            self._end_running()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            self._end_running()  # the connection closes: its request must not write
            super().send_400_response(msg)

        def shutdown(self) -> None:
            super().shutdown()
            self._tell_running()

        def _end_running(self) -> None:
            """Mark the running request disconnected (its `receive` says so, its `send`
            writes nothing), whatever was pipelined behind it, and tell it."""
            running = self._running
            if running is not None and not running.response_complete:
                running.disconnected = True
                running.message_event.set()
                self._tell_running()

        def _tell_running(self) -> None:
            """A waiting request ends its wait now (`Link.on_end`)."""
            running = self._running
            if running is not None and not running.response_complete:
                link = running.scope.get("extensions", {}).get(EXTENSION)
                if isinstance(link, Link) and link.on_end is not None:
                    link.on_end()

        def _await_headers(self) -> None:
            self._waiting_since = self.loop.time()
            self._header_bytes, self._tail = 0, b""

        def _too_slow(self) -> None:
            self._waiting_since = None
            if self._header_bytes:
                self._refuse(_TIMEOUT, "did not send its request headers within %g s "
                                       "(--header-timeout)", header_timeout)
            elif not self.transport.is_closing():
                self.transport.close()  # idle: as a keep-alive timeout would

        def _refuse(self, answer: bytes, why: str, *args: object) -> None:
            self._waiting_since = None
            if not self.transport.is_closing():
                log.note(f"slow-{answer[9:12].decode()}", "closed a connection from %s that "
                         + why, (self.client or ("?",))[0], *args)
                running = self._running
                if running is None or running.response_complete:
                    self.transport.write(answer)
                self._end_running()
                self.transport.close()

    def sweep(loop: asyncio.AbstractEventLoop, connections: set[Any]) -> None:
        """Close every connection past its header deadline; again in a moment."""
        late = loop.time() - header_timeout
        for connection in list(connections):
            if isinstance(connection, GuardedHttpTools) and \
                    connection._waiting_since is not None and connection._waiting_since < late:
                connection._too_slow()
        loop.call_later(sweep_every, sweep, loop, connections)

    return GuardedHttpTools


# uvicorn's own lines for what any client can repeat: one per 10 s each, counted.
UVICORN_REPEATABLE = frozenset({"Exceeded concurrency limit.", "Invalid HTTP request received."})


def throttle_uvicorn_lines() -> None:
    """Keep uvicorn's per-request complaints from flooding the log."""
    logging.getLogger("uvicorn.error").addFilter(
        ThrottledLines(UVICORN_REPEATABLE, ThrottledLog(logging.getLogger("uvicorn.error"))))


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.run keyword arguments for the connection limits in `settings`."""
    return {
        "http": guarded_protocol(settings.header_timeout),
        "timeout_keep_alive": settings.keep_alive_timeout,
        "limit_concurrency": settings.max_connections,
    }
