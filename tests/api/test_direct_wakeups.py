"""Wake-ups written straight to the connections (api.edge.direct_writes, api.edge.parked_polls, the
hub's direct streams), over real HTTP on loopback through uvicorn with the sidecar's own
protocol: the same bytes, headers, keep-alive and pipelining as answers sent through ASGI."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from api.edge import paired_writes
from tests.api.served import UVLOOP, Served, read_answer, read_event, request, serving
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return UVLOOP  # as flow-sidecar serves: a write to a closed transport raises there


@pytest.fixture
async def served(make_api: Callable[..., Any]) -> AsyncIterator[Served]:
    async with serving(make_api) as s:
        yield s


def header_names(lines: list[str]) -> list[str]:
    return [line.split(":")[0].lower() for line in lines[1:]]


async def test_a_wake_up_writes_one_answer_to_every_parked_connection(served: Served) -> None:
    version = await served.version("orders")
    connections = [await served.connect() for _ in range(30)]
    for i, (_, writer) in enumerate(connections):
        writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                             f"X-Producer-Id: p{i}", "X-Producer-Capacity: 5"))
    for _ in range(100):
        if served.parked.waiting == 30:
            break
        await asyncio.sleep(0.01)
    assert served.parked.waiting == 30
    await served.stop_queue("orders", 1)
    answers = [await read_answer(reader) for reader, _ in connections]
    wakeups = (await served.api.client.get("/healthz")).json()["wakeups"]
    assert wakeups["longPolls"]["connections"] == 30  # written directly, not through send
    assert 0 < wakeups["longPolls"]["seconds"] < 5 and wakeups["longPollsWaiting"] == 0
    assert len({body for _, body in answers}) == 1
    lines, body = answers[0]
    assert lines[0] == "HTTP/1.1 200 OK" and json.loads(body)["flowStopped"] is True
    # the same headers, in the same order, as an answer through uvicorn's send
    reader, writer = connections[0]
    writer.write(request(flow_path("orders")))  # kept alive: a second request is answered
    sent_lines, sent_body = await read_answer(reader)
    assert header_names(lines) == header_names(sent_lines) == [
        "date", "server", "content-type", "cache-control", "content-length"]
    assert json.loads(sent_body)["version"] == json.loads(body)["version"]
    await asyncio.sleep(0.05)  # the wake-up notes the producers after its writes
    listed = (await served.api.client.get(queue_path("orders"))).json()["activeProducers"]
    assert {p["id"] for p in listed} == {f"p{i}" for i in range(30)}
    assert served.parked.waiting == 0
    for _, writer in connections:
        writer.close()


async def test_answered_requests_leave_no_reference_cycle(served: Served) -> None:
    """A request's cycle is freed when it ends, not at the next full garbage collection
    (which at 10,000 queues is minutes away): a strong reference from its scope to
    itself kept every long poll of a 20-minute soak."""
    version = await served.version("orders")
    gc.collect()
    gc.disable()
    try:
        connections = [await served.connect() for _ in range(5)]
        for reader, writer in connections:  # parked, then woken and written directly
            writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                                 "Connection: close"))
        while served.parked.waiting < 5:
            await asyncio.sleep(0.01)
        await served.stop_queue("orders", 1)
        for reader, writer in connections:
            await read_answer(reader)
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
        reader, writer = await served.connect()  # answered at once, through the fast path
        writer.write(request(flow_path("orders"), "Connection: close"))
        await read_answer(reader)
        writer.close()
        await asyncio.sleep(0.1)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, RequestResponseCycle)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


async def test_connection_close_and_a_pipelined_request_wait_their_turn(
        served: Served) -> None:
    version = await served.version("orders")
    reader, writer = await served.connect()
    writer.write(request(flow_path("orders") + f"?since={version}&wait=10")
                 + request(flow_path("orders"), "Connection: close"))
    await asyncio.sleep(0.1)
    assert served.parked.waiting == 1
    assert not reader.at_eof() and len(reader._buffer) == 0  # type: ignore[attr-defined]
    await served.stop_queue("orders", 1)
    woken_lines, woken = await read_answer(reader)
    closing_lines, after = await read_answer(reader)
    assert json.loads(woken)["flowStopped"] and json.loads(after)["flowStopped"]
    assert "connection: close" not in woken_lines
    assert "connection: close" in closing_lines
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after the second

    version = await served.version("orders")
    reader, writer = await served.connect()
    writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                         "Connection: close"))
    await asyncio.sleep(0.1)
    await served.stop_queue("orders", 1000)
    lines, _ = await read_answer(reader)
    assert lines[-1] == "connection: close"  # as uvicorn writes it: after the others
    assert await asyncio.wait_for(reader.read(), 5) == b""


async def test_a_parked_poll_to_be_closed_stops_reading(served: Served) -> None:
    """A client that asked for `Connection: close` closes once answered: while the wake-up
    writes to 10,000 of them, the event loop must not handle those closes between the
    writes. A kept-alive poll goes on reading (its next request)."""
    version = await served.version("orders")
    closing, closing_writer = await served.connect()
    closing_writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                                 "Connection: close"))
    kept, kept_writer = await served.connect()
    kept_writer.write(request(flow_path("orders") + f"?since={version}&wait=10"))
    for _ in range(100):
        if served.parked.waiting == 2:
            break
        await asyncio.sleep(0.01)
    reading = {parked.cycle.keep_alive: parked.cycle.transport.is_reading()
               for group in served.parked._parked.values() for parked in group}
    assert reading == {False: False, True: True}
    await served.stop_queue("orders", 1)
    for reader in (closing, kept):
        _, body = await read_answer(reader)
        assert json.loads(body)["flowStopped"] is True
    assert await asyncio.wait_for(closing.read(), 5) == b""  # closed after its answer
    kept_writer.write(request(flow_path("orders")))  # kept alive: read and answered
    assert json.loads((await read_answer(kept))[1])["flowStopped"] is True
    for writer in (closing_writer, kept_writer):
        writer.close()


async def test_waits_that_end_together_are_answered_together(served: Served) -> None:
    """Long polls that began together end together: one task writes them all their
    answers (a wave of 1,000 such coroutines each answering through `send` held `/flow`
    50-185 ms), with the headers `send` would write, and notes their producers."""
    version = await served.version("orders")
    connections = [await served.connect() for _ in range(20)]
    for i, (_, writer) in enumerate(connections):
        writer.write(request(flow_path("orders") + f"?since={version}&wait=1",
                             f"X-Producer-Id: ended{i}"))
    while served.parked.waiting < 20:
        await asyncio.sleep(0.01)
    time.sleep(1.05)  # noqa: ASYNC251 (the loop held: every wait ends at its next turn)
    answers = [await read_answer(reader) for reader, _ in connections]
    assert {json.loads(body)["version"] for _, body in answers} == {version}
    ended = (await served.api.client.get("/healthz")).json()["wakeups"]["longPollsEnded"]
    assert ended["connections"] == 20  # one batch, written directly
    assert served.parked.waiting == 0 and served.parked.last_wakeup is None  # no change
    reader, writer = connections[0]
    writer.write(request(flow_path("orders")))  # kept alive; the same headers as `send`
    sent_lines, _ = await read_answer(reader)
    assert header_names(answers[0][0]) == header_names(sent_lines)
    listed = (await served.api.client.get(queue_path("orders"))).json()["activeProducers"]
    assert {p["id"] for p in listed} >= {f"ended{i}" for i in range(20)}
    for _, writer in connections:
        writer.close()


async def test_a_queue_gone_while_parked_is_a_404(served: Served) -> None:
    version = await served.version("orders")
    reader, writer = await served.connect()
    writer.write(request(flow_path("orders") + f"?since={version}&wait=10"))
    await asyncio.sleep(0.1)
    del served.api.broker.queues[("/", "orders")]
    await served.api.poll()
    await served.api.poll()  # missing from two polls: gone
    lines, body = await read_answer(reader)
    assert lines[0] == "HTTP/1.1 404 Not Found" and "orders" in json.loads(body)["detail"]
    writer.close()


async def test_sse_streams_get_each_event_written_directly(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written around their transports, on the two threads of `api.edge.paired_writes` (20
    streams are enough to share them out), in order and framed as uvicorn frames them."""
    around: list[int] = []

    def recorded(fd: int, data: bytes) -> int:
        around.append(fd)
        return os.write(fd, data)

    monkeypatch.setattr(paired_writes, "write_fd", recorded)
    streams = [await served.connect() for _ in range(20)]
    for _, writer in streams:
        writer.write(request("/events?queue=orders"))
    for reader, _ in streams:
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        await read_event(reader, b": ready")
    await asyncio.sleep(0.05)
    await served.stop_queue("orders", 1)
    await served.stop_queue("orders", 1000)  # two events, in order
    writes = served.api.sidecar.asgi.app.app.state.stream_writes  # type: ignore[attr-defined]
    for reader, _ in streams:
        stopped = await read_event(reader, b"event: flow")
        released = await read_event(reader, b"event: flow")
        assert b'"flowStopped":true' in stopped and b'"flowStopped":false' in released
    assert writes.last_wakeup is not None and writes.last_wakeup.connections == 20
    assert len(around) == 40 and len(set(around)) == 20
    for _, writer in streams:
        writer.close()


async def test_a_graceful_shutdown_lets_parked_polls_and_streams_go(served: Served) -> None:
    version = await served.version("orders")
    poll, poll_writer = await served.connect()
    poll_writer.write(request(flow_path("orders") + f"?since={version}&wait=60"))
    stream, stream_writer = await served.connect()
    stream_writer.write(request("/events?queue=orders"))
    await asyncio.wait_for(stream.readuntil(b"\r\n\r\n"), 5)
    await read_event(stream, b": ready")
    await asyncio.sleep(0.1)
    assert served.parked.waiting == 1
    served.stop()
    # both end within the grace period (2 s in flow-sidecar, 1 s here), not in 60 s
    await asyncio.wait_for(poll.read(), 5)
    await asyncio.wait_for(stream.read(), 5)
    assert served.parked.waiting == 0
