"""The producer edge's wire contract, the same with `--direct-writes on` and `off`: over
real loopback sockets against uvicorn serving the sidecar on uvloop. Keep-alive,
pipelining, HTTP/1.0, `Connection: close`, clients that reset or half-close while parked,
a wake-up while hundreds leave, an SSE reader that never reads, and answers byte-for-byte
equal between the modes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest

from sidecar.model import Change
from tests.api.served import (
    UVLOOP,
    Served,
    close_wait,
    read_answer,
    read_event,
    request,
    serving,
    until,
)
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio
MODES = pytest.mark.parametrize("mode", ["on", "off"])
STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")  # same length always
EVENT_ID = re.compile(rb"^id: \w+-(\d+)$", re.MULTILINE)


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return UVLOOP


async def parked(served: Served, count: int) -> None:
    """Until `count` long polls wait (parked, or in the hub with direct writes off)."""
    hub = served.api.sidecar.runtime.hub
    parked_polls = served.api.sidecar.asgi.app.parked  # type: ignore[attr-defined]
    await until(lambda: parked_polls.waiting + sum(
        n for _, n in hub._waiters.values()) >= count)


def without_date(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.lower().startswith("date:")]


@MODES
async def test_keep_alive_pipelining_and_close(make_api: Callable[..., Any],
                                               mode: str) -> None:
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        version = await served.version("orders")
        reader, writer = await served.connect()
        writer.write(request(flow_path("orders") + f"?since={version}&wait=10")
                     + request(flow_path("orders"), "Connection: close"))
        await parked(served, 1)
        await served.stop_queue("orders", 1)
        first, woken = await read_answer(reader)
        second, after = await read_answer(reader)
        assert json.loads(woken)["flowStopped"] and json.loads(after)["flowStopped"]
        assert "connection: close" not in first and "connection: close" in second
        assert await asyncio.wait_for(reader.read(), 5) == b""
        await until(lambda: served.tasks == 0)


@MODES
async def test_http_1_0_and_connection_close_polls_are_closed_after_their_answer(
        make_api: Callable[..., Any], mode: str) -> None:
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        version = await served.version("orders")
        old, old_writer = await served.connect()
        old_writer.write(f"GET {flow_path('orders')}?since={version}&wait=10 HTTP/1.0\r\n"
                         "Host: 127.0.0.1\r\n\r\n".encode())
        closing, closing_writer = await served.connect()
        closing_writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                                     "Connection: close"))
        await parked(served, 2)
        await served.stop_queue("orders", 1)
        for reader in (old, closing):
            lines, body = await read_answer(reader)
            assert lines[0].endswith("200 OK") and json.loads(body)["flowStopped"]
            assert "connection: close" in lines
            assert await asyncio.wait_for(reader.read(), 5) == b""
        await until(lambda: served.tasks == 0)


@MODES
async def test_clients_that_reset_or_half_close_while_parked(make_api: Callable[..., Any],
                                                             mode: str) -> None:
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        version = await served.version("orders")
        poll = request(flow_path("orders") + f"?since={version}&wait=3")
        reset = [await served.connect() for _ in range(10)]
        halves = [await served.connect() for _ in range(10)]
        stay = [await served.connect() for _ in range(10)]
        for _, writer in reset + halves + stay:
            writer.write(poll)
        await parked(served, 30)
        for _, writer in reset:  # RST, not FIN
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for _, writer in halves:
            writer.write_eof()
        await asyncio.sleep(0.1)
        await served.stop_queue("orders", 1)
        for reader, _ in stay:
            assert json.loads((await read_answer(reader))[1])["flowStopped"]
        for reader, _ in halves:  # answered or closed, never left hanging
            try:
                await read_answer(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
        for _, writer in halves + stay:
            writer.close()
        await until(lambda: served.tasks == 0, timeout=6)
        await until(lambda: close_wait(served.port) == 0, timeout=6)


@MODES
async def test_a_wake_up_while_hundreds_leave(make_api: Callable[..., Any],
                                              mode: str) -> None:
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        version = await served.version("orders")
        connections = [await served.connect() for _ in range(300)]
        for _, writer in connections:
            writer.write(request(flow_path("orders") + f"?since={version}&wait=3"))
        await parked(served, 300)
        leaving, staying = connections[:200], connections[200:]
        for _, writer in leaving:
            writer.transport.abort()
        await served.stop_queue("orders", 1)
        for reader, _ in staying:
            assert json.loads((await read_answer(reader))[1])["flowStopped"]
        for _, writer in staying:
            writer.close()
        await until(lambda: served.tasks == 0, timeout=6)


async def conversation(served: Served) -> list[tuple[list[str], bytes]]:
    """One producer's answers: a plain GET, a woken long poll (kept alive, and to be
    closed), an ended wait, and an SSE stream's first event."""
    version = await served.version("orders")
    answers = []
    reader, writer = await served.connect()
    writer.write(request(flow_path("orders"), "X-Producer-Id: p1"))
    answers.append(await read_answer(reader))
    writer.write(request(flow_path("orders") + f"?since={version}&wait=10"))
    closing, closing_writer = await served.connect()
    closing_writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                                 "Connection: close"))
    stream, stream_writer = await served.connect()
    stream_writer.write(request("/events?queue=orders"))
    head = (await asyncio.wait_for(stream.readuntil(b"\r\n\r\n"), 5)).decode()
    await read_event(stream, b": ready")
    await parked(served, 2)
    await served.stop_queue("orders", 1)
    answers.append(await read_answer(reader))
    answers.append(await read_answer(closing))
    event = await read_event(stream, b"event: flow")
    answers.append((head.split("\r\n")[:-2], event.split(b"\n", 1)[1]))  # without its id
    version = await served.version("orders")
    writer.write(request(flow_path("orders") + f"?since={version}&wait=0.3"))
    answers.append(await read_answer(reader))
    for one in (writer, closing_writer, stream_writer):
        one.close()
    return [(without_date(lines), STAMP.sub(b"<time>", body)) for lines, body in answers]


async def test_answers_are_byte_for_byte_equal_between_modes(
        make_api: Callable[..., Any]) -> None:
    said = {}
    for mode in ("on", "off"):
        async with serving(make_api, settings={"direct_writes": mode}) as served:
            said[mode] = await conversation(served)
            health = (await served.api.client.get("/healthz")).json()["wakeups"]
            assert health["writes"] == "send"  # asked through ASGI, not over the socket
            reader, writer = await served.connect()
            writer.write(request("/healthz", "Connection: close"))
            _, body = await read_answer(reader)
            assert json.loads(body)["wakeups"]["writes"] == ("direct" if mode == "on"
                                                             else "send")
    assert said["on"] == said["off"]


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_a_server_the_direct_path_does_not_know_is_served_through_send(
        make_api: Callable[..., Any], http: str) -> None:
    """uvicorn's own protocols (h11, or httptools without the sidecar's): long polls and
    streams are answered through `send`, and /healthz says so."""
    async with serving(make_api, http=http) as served:
        version = await served.version("orders")
        polls = [await served.connect() for _ in range(5)]
        for _, writer in polls:
            writer.write(request(flow_path("orders") + f"?since={version}&wait=10"))
        stream, stream_writer = await served.connect()
        stream_writer.write(request("/events?queue=orders"))
        await asyncio.wait_for(stream.readuntil(b"\r\n\r\n"), 5)
        await read_event(stream, b": ready")
        await parked(served, 5)
        await served.stop_queue("orders", 1)
        for reader, _ in polls:
            assert json.loads((await read_answer(reader))[1])["flowStopped"]
        assert b'"flowStopped":true' in await read_event(stream, b"event: flow")
        reader, writer = await served.connect()
        writer.write(request("/healthz", "Connection: close"))
        assert json.loads((await read_answer(reader))[1])["wakeups"]["writes"] == "send"
        for _, one in [*polls, (stream, stream_writer)]:
            one.close()


def rss() -> int:
    """This process's resident bytes (the sidecar is served in it)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def event_ids(reader: asyncio.StreamReader, ids: list[int]) -> None:
    """Append the sequence number of every `flow` event the stream sends, until it ends."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, ValueError):
        while True:
            size = int((await reader.readline()).strip(), 16)
            part = await reader.readexactly(size + 2)
            ids.extend(int(seq) for seq in EVENT_ID.findall(part))


async def stream_of(served: Served, receive_buffer: int | None = None,
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with an SSE stream of `orders` that has sent `: ready`."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", served.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(request("/events?queue=orders"))
    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    await read_event(reader, b": ready")
    return reader, writer


def streams(served: Served) -> int:
    """SSE streams the hub feeds."""
    return sum(len(s) for s in served.api.sidecar.runtime.hub._streams.values())


async def publish(served: Served, count: int) -> None:
    """`count` large changes of `orders` (the bounds are reached after fewer), straight to
    the hub as the engine's listener, a breath for the readers every 200."""
    hub, reason = served.api.sidecar.runtime.hub, "x" * 1500
    for _ in range(count):
        hub.on_change(Change("/", "orders", hub.seq, hub.seq % 2 == 0, reason=reason))
        if hub.seq % 200 == 0:
            await asyncio.sleep(0.005)


@MODES
async def test_an_sse_reader_that_never_reads_is_closed_at_its_bound(
        make_api: Callable[..., Any], mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """One client never reads its stream: it is closed once its backlog reaches the bound
    (its transport's unsent bytes, or its queue's events behind a blocked `send`), and
    the streams that read get every event, in order, with memory bounded."""
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        hub = served.api.sidecar.runtime.hub
        readers = [await stream_of(served) for _ in range(5)]
        _, stuck = await stream_of(served, receive_buffer=4096)
        stuck.transport.pause_reading()  # and from now on never reads
        await until(lambda: streams(served) == 6)
        got: list[list[int]] = [[] for _ in readers]
        reading = [asyncio.create_task(event_ids(r, ids)) for (r, _), ids in zip(readers, got)]
        before, first = rss(), hub.seq + 1
        for _ in range(60):  # at most 60,000 events
            await publish(served, 1000)
            if streams(served) == 5:
                break
        assert streams(served) == 5, "the never-reader's stream was not closed"
        await publish(served, 1000)  # the others go on
        last = hub.seq
        await until(lambda: all(ids and ids[-1] == last for ids in got), timeout=20)
        assert all(ids == list(range(first, last + 1)) for ids in got)
        assert rss() - before < 100 << 20
        await until(lambda: served.connections == 5)
        for _, writer in readers:
            writer.close()
        await asyncio.gather(*reading)
        stuck.close()
        assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


@MODES
async def test_a_graceful_stop_ends_a_stream_whose_client_stopped_reading(
        make_api: Callable[..., Any], mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """Below its bound, its writes paused: the stop closes it at once, not at the graceful
    timeout with a cancelled task's traceback."""
    async with serving(make_api, settings={"direct_writes": mode},
                       timeout_graceful_shutdown=3) as served:
        _, stuck = await stream_of(served, receive_buffer=4096)
        stuck.transport.pause_reading()
        while not any(c.flow.write_paused for c in served.server.server_state.connections):
            await publish(served, 100)  # until its socket's buffers are full
        assert streams(served) == 1
        loop = asyncio.get_running_loop()
        began = loop.time()
        served.stop()
        await until(lambda: served.tasks == 0, timeout=5)
        assert loop.time() - began < 2
        stuck.close()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


@MODES
async def test_a_paced_queue_answers_each_producer_its_own_rate_and_no_one_else(
        make_api: Callable[..., Any], mode: str) -> None:
    """A stopped queue is paced: a producer that says who it is is offered 0 messages/s,
    on a plain GET and when its parked wait ends; an anonymous asker beside it, parked in
    the same wake-up, gets the queue's shared answer without it."""
    async with serving(make_api, settings={"direct_writes": mode}) as served:
        await served.stop_queue("orders", 1)
        version = await served.version("orders")
        reader, writer = await served.connect()
        writer.write(request(flow_path("orders"), "X-Producer-Id: p1"))
        assert json.loads((await read_answer(reader))[1])["suggestedRate"] == 0.0
        other, other_writer = await served.connect()
        for one, producer in ((writer, "X-Producer-Id: p1"), (other_writer, "X-Anyone: a")):
            one.write(request(flow_path("orders") + f"?since={version}&wait=0.3", producer))
        paced, plain = await read_answer(reader), await read_answer(other)
        assert json.loads(paced[1])["suggestedRate"] == 0.0
        assert "suggestedRate" not in json.loads(plain[1])
        assert json.loads(paced[1])["flowStopped"] and json.loads(plain[1])["flowStopped"]
        for one in (writer, other_writer):
            one.close()
