"""Writing pre-encoded answers straight to a connection's transport, bypassing ASGI `send`.

When a transition wakes 10,000 parked long polls or SSE streams, what each costs through
ASGI (a coroutine step, two `send`s, uvicorn checking every header against its patterns)
made the last of them wait about a second. The wake-up instead writes the same bytes,
encoded once, to every waiting transport in one loop (`api.edge.parked_polls`,
`sidecar.signals.change_fanout`), on two threads at once (`api.edge.paired_writes`). What
those bytes must be, and what uvicorn's own `send` would note about the connection
afterwards, is kept here: the only module besides `api.edge.connection_limits` that knows
uvicorn's request-response cycle.

`api.edge.connection_limits` puts a weak reference to each request's cycle in its scope
(`EXTENSION`): the cycle holds the scope, so a strong one made every request a reference
cycle that only a full garbage collection frees (at 10,000 queues those are about a minute
apart, and a 20-minute soak kept tens of thousands of requests). A scope without it
(another server, tests over ASGI) makes the callers use `send` as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

from api.edge.paired_writes import socket_fd, write_around

EXTENSION = "flow_sidecar.link"  # scope["extensions"] key: the request's `Link`
MAX_BUFFERED = 1 << 20  # bytes a stream may have unsent before it is closed as too slow
Headers = Iterable[tuple[bytes, bytes]]
log = logging.getLogger("flow_sidecar.http")


class Link:
    """What the edge may do with one request's connection beyond ASGI: its uvicorn cycle
    (weakly: the cycle holds the scope, which holds this), and what to call when a
    graceful stop begins or the connection ends while the request waits (`on_end`)."""

    __slots__ = ("cycle", "on_end")

    def __init__(self, cycle: weakref.ref[RequestResponseCycle]) -> None:
        self.cycle = cycle
        self.on_end: Callable[[], None] | None = None


class DirectSwitch:
    """Whether wake-ups write directly (`--direct-writes`); the first failure of the
    direct path turns it off for good, with one ERROR line: every answer then goes
    through ASGI `send`, as on a server the direct path does not know."""

    def __init__(self, on: bool = True) -> None:
        self.on = on
        self.failure: str | None = None  # why it was turned off, for /healthz

    def failed(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.error("direct writes failed (%s); answering through ASGI send from now on",
                      self.failure, exc_info=exc)
        self.on = False


@contextlib.contextmanager
def stopping(scope: MutableMapping[str, Any]) -> Iterator[asyncio.Future[None] | None]:
    """A future resolved when a graceful stop begins or the connection ends while the
    request waits (None on a server that does not say), for the wait to end at once."""
    link = link_of(scope)
    if link is None:
        yield None
        return
    stop = asyncio.get_running_loop().create_future()
    link.on_end = lambda: None if stop.done() else stop.set_result(None)
    try:
        yield stop
    finally:
        link.on_end = None


def link_of(scope: MutableMapping[str, Any]) -> Link | None:
    """The request's `Link`, when the server is the one it knows."""
    link = scope.get("extensions", {}).get(EXTENSION)
    return link if isinstance(link, Link) else None


def cycle_of(scope: MutableMapping[str, Any]) -> RequestResponseCycle | None:
    """The uvicorn cycle of this request, when it can be written to directly. (What is
    written directly has no access-log line; flow-sidecar serves without them.)"""
    link = link_of(scope)
    cycle = None if link is None else link.cycle()
    return cycle if isinstance(cycle, RequestResponseCycle) else None


def drop_if_stalled(link: Link) -> None:
    """Close the request's connection at once when its client has stopped reading (its
    transport holds more than the high-water mark, and `send` waits): a stream's `send`
    then returns, and `receive` says the client left. Unsent bytes are dropped: the client
    reconnects with Last-Event-ID."""
    cycle = link.cycle()
    if cycle is not None and cycle.flow.write_paused:
        cycle.transport.abort()


def whole_answers(default_headers: Headers, headers: Headers,
                  body: bytes) -> tuple[bytes, bytes]:
    """A 200 answer with `body` as uvicorn's `send` would write it, for a connection kept
    alive and for one to be closed: (keep-alive, close). Same headers in the same order
    (uvicorn's date and server first)."""
    lines = [STATUS_LINE[200]]
    for name, value in (*default_headers, *headers, (b"content-length", b"%d" % len(body))):
        lines += (name, b": ", value, b"\r\n")
    head = b"".join(lines)
    return head + b"\r\n" + body, head + b"connection: close\r\n\r\n" + body


def begin_whole(cycle: RequestResponseCycle, answers: tuple[bytes, bytes]) -> bytes | None:
    """Begin a whole answer (`whole_answers`) on the cycle, from either thread of a
    wake-up's step (`api.edge.paired_writes.shared`): the bytes to write on its connection
    (b"" when its client left), or None when only `send` may answer it now (a response
    begun, or writes paused). `finish` it once written (a wake-up first writes every
    answer, then finishes them, so that the last answer waits for writes only)."""
    if cycle.disconnected or cycle.transport.is_closing():
        return b""
    if cycle.response_started or cycle.flow.write_paused:
        return None
    cycle.response_started = True  # begun: a pipelined request waits for `finish`
    cycle.waiting_for_100_continue = False
    return answers[0] if cycle.keep_alive else answers[1]


def finish(cycle: RequestResponseCycle) -> None:
    """End a response that `begin_whole` began, as uvicorn's `send` ends one: close the
    connection, or let the next request in."""
    if cycle.response_complete or not cycle.response_started:
        return
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()


class ChunkWriter:
    """A writer of events into a cycle's streamed (begun, unfinished) response, framed as
    uvicorn frames a body part (`sidecar.signals.change_fanout.DirectWriter`). Called, it
    writes through the transport, on the event loop's thread; `around_loop` writes around
    the transport, from either thread of a hub's step (`api.edge.paired_writes.shared`).
    Neither reads the cycle's `disconnected` or `response_complete`: uvicorn marks the
    first once the transport is closed, and a stream drops its writer before it completes
    its response (a wake-up of 10,000 streams touched 10,000 cycles for nothing)."""

    __slots__ = ("begun", "chunked", "fd", "transport")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self.transport = cycle.transport
        self.fd = socket_fd(cycle.transport)  # None: not to be written around (TLS)
        self.chunked = bool(cycle.chunked_encoding)
        self.begun = 0  # bytes of an event that `around_loop` wrote and the call finishes

    def __call__(self, event: bytes) -> bool:
        """Write the event (or what `around_loop` left of it); False once the client left
        or has more than `MAX_BUFFERED` bytes unread, so that the stream ends and its
        client reconnects."""
        transport = self.transport
        if transport.is_closing():
            return False
        data = _framed(event) if self.chunked else event
        if self.begun:  # the rest of an event begun on the socket must follow it
            data, self.begun = data[self.begun:], 0
        elif transport.get_write_buffer_size() > MAX_BUFFERED:
            return False
        transport.write(data)
        return True

    def around_loop(self, event: bytes) -> bool:
        """Write the event on the socket when nothing is queued before it; True when the
        socket took all of it, else False (nothing written, or `begun`), and the event
        loop's thread then calls the writer. Safe off the loop's thread only while the
        loop's thread runs no event (inside a hub's step): then no transport is closed."""
        data = _framed(event) if self.chunked else event
        written = write_around(self.transport, self.fd, data)
        if written == len(data):
            return True
        self.begun = written  # 0: nothing written, and the call writes it all
        return False


_last: tuple[bytes, bytes] = (b"", b"")  # the last event and its chunk: one encoding a wake


def _framed(event: bytes) -> bytes:
    """The event as one chunk of a chunked body; the same object for every stream of a
    wake-up (read once: the two threads of a step may both replace it, with equal bytes)."""
    global _last
    last = _last
    if last[0] is not event:
        last = _last = (event, b"%x\r\n%b\r\n" % (len(event), event))
    return last[1]
