"""api.edge.paired_writes, and the SSE writer that uses it (api.edge.direct_writes.ChunkWriter), over
real loopback connections, on uvloop (what uvicorn runs on) and on asyncio's own loop:
every byte arrives, in order, whatever the socket buffers take at once, and what may not
be written around its transport is written through it."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Awaitable, Callable

import pytest
import uvloop

from api.edge import paired_writes
from api.edge.direct_writes import ChunkWriter
from api.edge.paired_writes import MIN_PAIRED, shared, socket_fd, write_around

LOOPS = pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop,
                                                 asyncio.new_event_loop],
                                ids=["uvloop", "asyncio"])
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class Kept(asyncio.Protocol):
    """A server side that only keeps its transport."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]


def run(loop_factory: LoopFactory, count: int,
        body: Callable[[list[Kept], list[socket.socket]], Awaitable[None]]) -> None:
    """`body(server sides, client sockets)` with `count` loopback connections."""

    async def main() -> None:
        kept: list[Kept] = []

        def made() -> Kept:
            kept.append(Kept())
            return kept[-1]

        server = await asyncio.get_running_loop().create_server(made, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
        while len(kept) < count or not all(hasattr(k, "transport") for k in kept):
            await asyncio.sleep(0.01)
        try:
            await body(kept, clients)
        finally:
            for client in clients:
                client.close()
            server.close()

    loop = loop_factory()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


async def received(client: socket.socket, size: int) -> bytes:
    """`size` bytes from the client socket, read without blocking the loop."""
    client.setblocking(False)
    loop, data = asyncio.get_running_loop(), b""
    while len(data) < size:
        data += await asyncio.wait_for(loop.sock_recv(client, 1 << 20), 10)
    return data


def written(sides: list[Kept], data: Callable[[int], bytes]) -> None:
    """`data(i)` to each connection as a wake-up writes: around the transports on two
    threads (`shared`), then what a socket did not take through the transport."""
    rest: dict[int, bytes] = {}

    def attempt(i: int) -> bool:
        transport = sides[i].transport
        whole = data(i)
        rest[i] = whole[write_around(transport, socket_fd(transport), whole):]
        return not rest[i]

    for i in shared(range(len(sides)), attempt):
        sides[i].transport.write(rest[i])


@LOOPS
def test_every_connection_gets_its_bytes_written_on_two_threads(
        loop_factory: LoopFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    writers: set[int] = set()

    def recorded(fd: int, data: bytes) -> int:
        writers.add(threading.get_ident())
        return os.write(fd, data)

    monkeypatch.setattr(paired_writes, "write_fd", recorded)

    async def body(kept: list[Kept], clients: list[socket.socket]) -> None:
        written(kept, lambda i: b"answer %d\n" % i)
        assert writers  # around the transports (which threads: the test below)
        by_port = {side.transport.get_extra_info("peername")[1]: i
                   for i, side in enumerate(kept)}
        for client in clients:
            i = by_port[client.getsockname()[1]]
            assert await received(client, len(b"answer %d\n" % i)) == b"answer %d\n" % i

    run(loop_factory, 3 * MIN_PAIRED, body)


@LOOPS
def test_what_a_socket_does_not_take_at_once_follows_in_order(
        loop_factory: LoopFactory) -> None:
    """An answer larger than the socket's buffers: the rest goes through the transport,
    before anything written after."""
    big = bytes(range(256)) * (16 << 12)  # 16 MB

    async def body(kept: list[Kept], clients: list[socket.socket]) -> None:
        written(kept, lambda i: big)
        assert all(side.transport.get_write_buffer_size() > 0 for side in kept)
        for side in kept:
            side.transport.write(b"after")
        for client in clients:
            assert await received(client, len(big) + 5) == big + b"after"

    run(loop_factory, MIN_PAIRED, body)


@LOOPS
def test_a_connection_its_client_reset_costs_the_others_nothing(
        loop_factory: LoopFactory) -> None:
    async def body(kept: list[Kept], clients: list[socket.socket]) -> None:
        gone = clients[0]
        gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        gone.close()  # a reset, not a polite close; the loop has not seen it yet
        written(kept, lambda i: b"still here")
        for client in clients[1:]:
            assert await received(client, 10) == b"still here"

    run(loop_factory, MIN_PAIRED + 1, body)


class Recorded:
    """A transport that is not plain TCP (as a TLS one is not): it only records writes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def test_any_other_transport_is_never_written_around() -> None:
    other = Recorded()
    assert socket_fd(other) is None  # type: ignore[arg-type]
    assert write_around(other, None, b"x") == 0  # type: ignore[arg-type]
    assert other.written == []


def test_shared_attempts_every_item_once_on_both_threads() -> None:
    """Each item is attempted once, by one of the two threads (both attempt some: the
    loop's thread waits at its first attempt until the helper has made one); what an
    attempt did not finish comes back, and only that."""
    attempted: list[tuple[int, int]] = []
    helper_attempted = threading.Event()

    def attempt(item: int) -> bool:
        me = threading.get_ident()
        if me == threading.main_thread().ident:
            assert helper_attempted.wait(10), "the helper never attempted"
        else:
            helper_attempted.set()
        attempted.append((item, me))
        return item % 3 != 0

    items = list(range(10 * MIN_PAIRED))
    left = shared(items, attempt)
    assert sorted(item for item, _ in attempted) == items
    assert len({thread for _, thread in attempted}) == 2
    assert sorted(left) == [item for item in items if item % 3 == 0]


def test_a_few_items_are_attempted_on_this_thread_only() -> None:
    threads: set[int] = set()

    def attempt(item: int) -> bool:
        threads.add(threading.get_ident())
        return item != 2

    assert shared(list(range(MIN_PAIRED - 1)), attempt) == [2]
    assert threads == {threading.get_ident()}


class Cycle:
    """What a `ChunkWriter` reads of uvicorn's cycle."""

    def __init__(self, transport: asyncio.Transport, chunked: bool = True) -> None:
        self.transport, self.chunked_encoding = transport, chunked


def chunk(event: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(event), event)


def filled(transport: asyncio.Transport) -> bytes:
    """Write to the transport's socket around it until the socket takes no more; what
    was written."""
    fd = transport.get_extra_info("socket").fileno()
    filler = b""
    while True:
        try:
            filler += b"f" * os.write(fd, b"f" * 65536)
        except BlockingIOError:
            return filler


@LOOPS
def test_events_written_around_the_loop_arrive_framed_and_in_order(
        loop_factory: LoopFactory) -> None:
    """Events tried around the loop on two threads, those not taken then written by the
    call: a connection with bytes queued in its transport gets the event after them, a
    closing one gets nothing and its writer says so."""
    async def body(kept: list[Kept], clients: list[socket.socket]) -> None:
        writers = [ChunkWriter(Cycle(side.transport)) for side in kept]  # type: ignore[arg-type]
        before = filled(kept[0].transport) + b"queued"
        kept[0].transport.write(b"queued")  # the socket is full: the transport queues it
        assert kept[0].transport.get_write_buffer_size() == 6
        closing = kept[2].transport
        closing.close()
        for event in (b"one", b"two"):
            left = shared(writers, lambda writer, event=event: writer.around_loop(event))
            assert writers[0] in left and writers[2] in left and writers[1] not in left
            for writer in left:
                assert writer(event) == (writer is not writers[2])
        for i, client in enumerate(clients):
            if i != 2:
                expected = (before if i == 0 else b"") + chunk(b"one") + chunk(b"two")
                assert await received(client, len(expected)) == expected

    run(loop_factory, 2 * MIN_PAIRED, body)


@LOOPS
def test_an_event_the_socket_took_in_part_is_finished_by_the_call(
        loop_factory: LoopFactory) -> None:
    async def body(kept: list[Kept], clients: list[socket.socket]) -> None:
        writer = ChunkWriter(Cycle(kept[0].transport))  # type: ignore[arg-type]
        filler = filled(kept[0].transport)
        start = clients[0].recv(65536, socket.MSG_WAITALL)  # some room, less than the event
        event = bytes(range(256)) * 2048  # 512 KB
        assert not writer.around_loop(event)
        assert 0 < writer.begun < len(chunk(event))
        assert writer(event) and writer.begun == 0
        assert writer(b"next")
        expected = filler[len(start):] + chunk(event) + chunk(b"next")
        assert await received(clients[0], len(expected)) == expected

    run(loop_factory, 1, body)


def test_a_stream_over_another_transport_is_written_through_it() -> None:
    other = Recorded()
    writer = ChunkWriter(Cycle(other, chunked=False))  # type: ignore[arg-type]
    assert writer.fd is None and not writer.around_loop(b"event")
    assert other.written == []
    assert writer(b"event") and other.written == [b"event"]
