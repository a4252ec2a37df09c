"""A wake-up's writes to its long polls' connections, made on two threads at once.

Writing an answer to a loopback connection costs about 8 µs, nearly all of it in the
kernel's `send` (which on loopback also runs the receiving side's TCP), and CPython need
not hold the GIL for that part. uvloop's `transport.write` holds it throughout, so the
writes of a wake-up run on one core: 10,000 of them took 70-100 ms here. Inside
`paired()` the direct writes (`api.direct_writes.write_whole`) are collected instead, and
when the block ends a helper thread and the event loop's thread make them at once, each
an `os.write` on the connection's socket, the two taking turns from one counter.

Measured on this machine's two cores (2026-11-28): 9,900 bare `os.write`s took 36-52 ms
on two threads against 68-97 ms on one; 10,000 long polls woken by the sidecar had a p99
of 91 and 85 ms paired against 130 ms on one thread in the same hour. Streams (SSE) are
not paired: ten paired runs were no faster than one thread and took a fifth to a half
more CPU. Every run, and a profile of both, is in docs/benchmarks.md ("Long-poll
wake-up").

Why it is safe:

- Only a plain TCP transport (uvloop's or asyncio's) whose write buffer is empty and that
  is not closing is written around: its bytes would have gone straight to the socket
  anyway, and nothing it holds could be overtaken. Any other (TLS, a buffer not empty)
  gets `transport.write` as before.
- The event loop's thread waits for the helper before the block ends, and the block holds
  no `await`: no event is handled meanwhile, so no transport is closed and no file
  descriptor reused under the helper.
- What a `write` did not take (a full socket buffer, an error) is then handed to
  `transport.write` on the event loop's thread, which queues the rest, or notes the
  error and closes the connection, as it would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

#: the transports whose socket may be written around them: plain TCP (not TLS)
PLAIN_TCP = frozenset({"TCPTransport", "_SelectorSocketTransport"})
MIN_PAIRED = 16  # fewer writes go on one thread: a small wake-up is not worth a handover
Write = tuple[asyncio.Transport, bytes]

_helper: ThreadPoolExecutor | None = None
#: the open block's writes by transport (on the event loop only): a transport written twice
#: in a block gets both in one write, so that the two threads cannot reorder them
_pending: dict[int, Write] | None = None
_write = os.write  # what both threads write with (a test records which thread made each)


def send(transport: asyncio.Transport, data: bytes) -> None:
    """Write `data` on the connection: inside `paired()` at the block's end, else now."""
    if _pending is None or not _around(transport):
        transport.write(data)
    elif (before := _pending.get(id(transport))) is None:
        _pending[id(transport)] = (transport, data)
    else:
        _pending[id(transport)] = (transport, before[1] + data)


@contextlib.contextmanager
def paired() -> Iterator[None]:
    """Collect the block's writes (`send`) and make them at its end, on two threads when
    there are enough. The block must not await. A block inside another adds to it."""
    global _pending
    if _pending is not None:
        yield
        return
    _pending = {}
    try:
        yield
    finally:
        pending, _pending = list(_pending.values()), None
        _flush(pending)


def _around(transport: asyncio.Transport) -> bool:
    """Whether the transport's socket may be written to directly now."""
    return (type(transport).__name__ in PLAIN_TCP and not transport.is_closing()
            and transport.get_write_buffer_size() == 0)


def _flush(pending: list[Write]) -> None:
    """Make the writes on the helper thread and on this one at once, each taking the next
    write not yet taken, so that neither waits while writes are left (the helper starts
    late by its wake-up, about 0.07 ms here, and may lose its core meanwhile); then hand
    what a socket did not take to its transport."""
    if len(pending) < MIN_PAIRED:
        for transport, data in pending:
            transport.write(data)
        return
    global _helper
    if _helper is None:
        _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="paired-writes")
    taken = [0] * len(pending)
    turns = itertools.count()  # next() is one call into C, atomic under the GIL
    helped = _helper.submit(_write_all, pending, taken, turns)
    _write_all(pending, taken, turns)
    helped.result()
    for (transport, data), written in zip(pending, taken):
        if written < len(data):
            transport.write(data[written:])


def _write_all(writes: Sequence[Write], taken: list[int], turns: Iterator[int]) -> None:
    """Take the next turn's write and make it on its socket (`_write`), until none is left;
    how many bytes each took goes to `taken` (0 on an error, which `transport.write` then
    meets and handles)."""
    for turn in turns:
        if turn >= len(writes):
            return
        transport, data = writes[turn]
        sock = transport.get_extra_info("socket")  # None only once closed: not in a block
        with contextlib.suppress(OSError):
            taken[turn] = 0 if sock is None else _write(sock.fileno(), data)
