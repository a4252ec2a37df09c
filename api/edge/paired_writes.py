"""A wake-up's writes to its connections, made on two threads at once.

Writing to a loopback connection costs about 7 µs, nearly all of it in the kernel's
`send` (which on loopback also runs the receiving side's TCP), and CPython need not hold
the GIL for that part. uvloop's `transport.write` holds it throughout, so the writes of a
wake-up run on one core: 10,000 of them took 70-100 ms here. `shared(items, attempt)`
hands a step of a wake-up to a helper thread and the event loop's thread at once, the
two taking turns from one counter. Each thread runs the whole attempt of the items it
takes, the Python that decides what to write included, and writes around the transport
(`write_around`: a long poll's answer in `api.edge.parked_polls`, an SSE stream's event in
`api.edge.direct_writes.ChunkWriter`); the event loop's thread then finishes what an attempt
could not. Only one thread runs Python at a time, but each runs it while the other is in
the kernel.

Sharing the whole attempt, not only the `os.write`s, is what made SSE streams gain too:
docs/benchmarks.md, "Long-poll wake-up".

Why it is safe:

- Only a plain TCP transport (uvloop's or asyncio's) whose write buffer is empty and that
  is not closing is written around: its bytes would have gone straight to the socket
  anyway, and nothing it holds could be overtaken. Any other (TLS, a buffer not empty)
  gets `transport.write` as before.
- The event loop's thread waits for the helper before `shared` returns, and holds no
  `await` meanwhile: no event is handled, so no transport is closed and no file
  descriptor reused under the helper, and nothing else writes to the connections. The
  helper only reads the transports' state and writes to their sockets (and marks a
  long poll's cycle as answered, which only its thread touches meanwhile).
- What a `write` did not take (a full socket buffer, an error) is then handed to
  `transport.write` on the event loop's thread, which queues the rest, or notes the
  error and closes the connection, as it would have.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

#: the transports whose socket may be written around them: plain TCP (not TLS)
PLAIN_TCP = frozenset({"TCPTransport", "_SelectorSocketTransport"})
MIN_PAIRED = 16  # fewer items go on one thread: a small wake-up is not worth a handover
T = TypeVar("T")

_helper: ThreadPoolExecutor | None = None
write_fd = os.write  # what both threads write with (a test records which thread made each)


def socket_fd(transport: asyncio.BaseTransport) -> int | None:
    """The socket of a transport that may be written around, else None (TLS, or closed)."""
    if type(transport).__name__ not in PLAIN_TCP:
        return None
    sock = transport.get_extra_info("socket")
    return None if sock is None else int(sock.fileno())


def write_around(transport: asyncio.WriteTransport, fd: int | None, data: bytes) -> int:
    """Write `data` on the transport's socket `fd` (`socket_fd`), around the transport,
    from either thread of `shared`; how many bytes the socket took. None are taken when
    the transport is closing or has bytes queued (they must go first), nor on an error:
    the event loop's thread then hands what is left to `transport.write`, which queues
    it, or meets the error and closes the connection, as it would have."""
    if fd is None or transport.is_closing() or transport.get_write_buffer_size():
        return 0
    try:
        return write_fd(fd, data)
    except OSError:
        return 0


def shared(items: Sequence[T], attempt: Callable[[T], bool]) -> list[T]:
    """`attempt(item)` for every item, on the helper thread and this one at once when there
    are enough, each thread taking the next item not yet taken, so that neither waits while
    items are left (the helper starts late by its wake-up, about 0.07 ms here, and may lose
    its core meanwhile); the items whose attempt returned False, for the event loop's
    thread to finish. `attempt` may only write around transports (see the module
    docstring), and must not raise."""
    if len(items) < MIN_PAIRED:
        return [item for item in items if not attempt(item)]
    global _helper
    if _helper is None:
        _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="paired-writes")
    left: list[T] = []
    turns = itertools.count()  # next() is one call into C, atomic under the GIL
    helped = _helper.submit(_attempt_all, items, attempt, turns, left)
    try:
        _attempt_all(items, attempt, turns, left)
    finally:
        helped.result()  # never go on while the helper may still write
    return left


def _attempt_all(items: Sequence[T], attempt: Callable[[T], bool], turns: Iterator[int],
                 left: list[T]) -> None:
    """Attempt the next turn's item until none is left; what an attempt did not finish
    goes to `left`. Lean on purpose: while one thread runs Python here, the other waits
    for the GIL."""
    count = len(items)
    for turn in turns:
        if turn >= count:
            return
        if not attempt(items[turn]):
            left.append(items[turn])
