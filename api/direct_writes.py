"""Writing pre-encoded answers straight to a connection's transport, bypassing ASGI `send`.

When a transition wakes 10,000 parked long polls or SSE streams, what each costs through
ASGI (a coroutine step, two `send`s, uvicorn checking every header against its patterns)
made the last of them wait about a second. The wake-up instead writes the same bytes,
encoded once, to every waiting transport in one loop (`api.parked_polls`,
`sidecar.signals.change_fanout`); a long poll's, on two threads at once
(`api.paired_writes`). What those bytes must be, and what uvicorn's own `send`
would note about the connection afterwards, is kept here: the only module besides
`api.connection_limits` that knows uvicorn's request-response cycle.

`api.connection_limits` puts a weak reference to each request's cycle in its scope
(`EXTENSION`): the cycle holds the scope, so a strong one made every request a reference
cycle that only a full garbage collection frees (at 10,000 queues those are about a minute
apart, and a 20-minute soak kept tens of thousands of requests). A scope without it
(another server, tests over ASGI) makes the callers use `send` as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

from api.paired_writes import send

EXTENSION = "flow_sidecar.cycle"  # scope["extensions"] key: a weakref to the request's cycle
MAX_BUFFERED = 1 << 20  # bytes a stream may have unsent before it is closed as too slow
Headers = Iterable[tuple[bytes, bytes]]
#: writes one pre-encoded event to a stream; False when it cannot (gone, or too far behind)
ChunkWriter = Callable[[bytes], bool]


def cycle_of(scope: MutableMapping[str, Any]) -> RequestResponseCycle | None:
    """The uvicorn cycle of this request, when it can be written to directly. (What is
    written directly has no access-log line; flow-sidecar serves without them.)"""
    ref = scope.get("extensions", {}).get(EXTENSION)
    cycle = ref() if isinstance(ref, weakref.ref) else None
    return cycle if isinstance(cycle, RequestResponseCycle) else None


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


def write_whole(cycle: RequestResponseCycle, answers: tuple[bytes, bytes]) -> bool:
    """Write a whole answer (`whole_answers`) on the cycle's connection; `finish` it
    afterwards (a wake-up first writes every answer, then finishes them, so that the
    last answer waits for writes only). True when the request is answered or its client
    left, False when only `send` may answer it now (a response begun, or writes
    paused)."""
    if cycle.disconnected:
        return True
    if cycle.response_started or cycle.flow.write_paused:
        return False
    cycle.response_started = True  # begun: a pipelined request waits for `finish`
    cycle.waiting_for_100_continue = False
    send(cycle.transport, answers[0] if cycle.keep_alive else answers[1])
    return True


def finish(cycle: RequestResponseCycle) -> None:
    """End a response that `write_whole` wrote, as uvicorn's `send` ends one: close the
    connection, or let the next request in."""
    if cycle.response_complete or not cycle.response_started:
        return
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()


_last: tuple[bytes, bytes] = (b"", b"")  # the last event and its chunk: one encoding a wake


def chunk_writer(cycle: RequestResponseCycle) -> ChunkWriter:
    """A writer of events into the cycle's streamed (begun, unfinished) response, framed
    as uvicorn frames a body part; False once the client left or has more than
    `MAX_BUFFERED` bytes unread, so that the stream ends and its client reconnects."""
    transport, chunked = cycle.transport, bool(cycle.chunked_encoding)

    def write(event: bytes) -> bool:
        global _last
        # not the cycle's `disconnected` or `response_complete`: uvicorn marks the first
        # once the transport is closed, and a stream drops its writer before it completes
        # its response (a wake-up of 10,000 streams touched 10,000 cycles for nothing)
        if transport.is_closing() or transport.get_write_buffer_size() > MAX_BUFFERED:
            return False
        if not chunked:
            transport.write(event)
            return True
        if _last[0] is not event:
            _last = (event, b"%x\r\n%b\r\n" % (len(event), event))
        transport.write(_last[1])
        return True

    return write
