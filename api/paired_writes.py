"""A wake-up's writes to its connections, made on two threads at once.

Writing to a loopback connection costs about 7 µs, nearly all of it in the kernel's
`send` (which on loopback also runs the receiving side's TCP), and CPython need not hold
the GIL for that part. uvloop's `transport.write` holds it throughout, so the writes of a
wake-up run on one core: 10,000 of them took 70-100 ms here. Two ways hand them to a
helper thread and the event loop's thread at once, the two taking turns from one counter:

- `shared(items, attempt)`: each thread runs the whole attempt of the items it takes,
  the Python that decides what to write included, and writes around the transport
  (`api.direct_writes.ChunkWriter.around_loop`, an SSE stream's event); the event loop's
  thread then finishes what an attempt could not. Only one thread runs Python at a
  time, but each runs it while the other is in the kernel.
- `paired()`: a long poll's answers (`api.direct_writes.write_whole`) are collected on
  the event loop's thread, and only their `os.write`s are shared when the block ends.

Measured on this machine's two cores (2026-11-28; every run, and a profile, in
docs/benchmarks.md, "Long-poll wake-up"): 10,000 long polls had a p99 of 91 and 85 ms
paired against 130 ms on one thread in the same hour. SSE streams gained nothing from
sharing only their `os.write`s (ten runs: the event loop's thread still ran every
stream's Python while the helper waited); shared whole, their p99 was 80 and 60 ms
against 94 and 112 ms on one thread, alternated in the same hour.

Why it is safe:

- Only a plain TCP transport (uvloop's or asyncio's) whose write buffer is empty and that
  is not closing is written around: its bytes would have gone straight to the socket
  anyway, and nothing it holds could be overtaken. Any other (TLS, a buffer not empty)
  gets `transport.write` as before.
- The event loop's thread waits for the helper before `shared` returns (or the block
  ends), and holds no `await` meanwhile: no event is handled, so no transport is closed
  and no file descriptor reused under the helper, and nothing else writes to the
  connections. The helper only reads the transports' state and writes to their sockets.
- What a `write` did not take (a full socket buffer, an error) is then handed to
  `transport.write` on the event loop's thread, which queues the rest, or notes the
  error and closes the connection, as it would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

#: the transports whose socket may be written around them: plain TCP (not TLS)
PLAIN_TCP = frozenset({"TCPTransport", "_SelectorSocketTransport"})
MIN_PAIRED = 16  # fewer items go on one thread: a small wake-up is not worth a handover
T = TypeVar("T")

_helper: ThreadPoolExecutor | None = None
write_fd = os.write  # what both threads write with (a test records which thread made each)


@dataclass(slots=True)
class _Write:
    """A write collected in a `paired()` block: its transport, the transport's socket
    (looked up when collected, so that the thread writing it holds the GIL less), and the
    bytes it has not taken yet."""

    transport: asyncio.Transport
    fd: int
    data: bytes

    def attempt(self) -> bool:
        """Write on the socket, from either thread; True when it took every byte (on an
        error nothing is taken: `transport.write` then meets the error and handles it)."""
        try:
            self.data = self.data[write_fd(self.fd, self.data):]
        except OSError:
            return False
        return not self.data


#: the open block's writes by transport (on the event loop only): a transport written twice
#: in a block gets both in one write, so that the two threads cannot reorder them
_pending: dict[int, _Write] | None = None


def socket_fd(transport: asyncio.BaseTransport) -> int | None:
    """The socket of a transport that may be written around, else None (TLS, or closed)."""
    if type(transport).__name__ not in PLAIN_TCP:
        return None
    sock = transport.get_extra_info("socket")
    return None if sock is None else int(sock.fileno())


def send(transport: asyncio.Transport, data: bytes) -> None:
    """Write `data` on the connection: inside `paired()` at the block's end, else now."""
    if _pending is None or not _around(transport):
        transport.write(data)
    elif (before := _pending.get(id(transport))) is None:
        fd = transport.get_extra_info("socket").fileno()  # an open transport has one
        _pending[id(transport)] = _Write(transport, fd, data)
    else:
        before.data += data


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
        for write in shared(pending, _Write.attempt):
            write.transport.write(write.data)  # queues the rest, or meets the error


def _around(transport: asyncio.Transport) -> bool:
    """Whether the transport's socket may be written to directly now."""
    return (type(transport).__name__ in PLAIN_TCP and not transport.is_closing()
            and transport.get_write_buffer_size() == 0)


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
    _attempt_all(items, attempt, turns, left)
    helped.result()
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
