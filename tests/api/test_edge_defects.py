"""What no client and no server change may do to the producer edge, over real loopback
sockets against uvicorn serving the sidecar on uvloop: every wake-up settles every waiter
(a broken direct path falls back to `send`), a connection uvicorn closed leaks nothing,
pipelined headers meet the same cap and deadline as a fresh connection's, no client can
make the sidecar log a traceback, and a graceful stop answers every waiter cleanly."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.api.served import (
    UVLOOP,
    Served,
    broken_direct_path,
    close_wait,
    read_answer,
    read_event,
    request,
    serving,
    until,
)
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return UVLOOP


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()
            or "never retrieved" in r.getMessage()]


async def test_a_direct_path_that_raises_leaves_no_waiter_unanswered(
        make_api: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    """As a renamed server field would: every parked poll and stream is still answered
    (through `send`), and one ERROR line says why."""
    async with serving(make_api) as served:
        version = await served.version("orders")
        polls = [await served.connect() for _ in range(50)]
        for i, (_, writer) in enumerate(polls):
            writer.write(request(flow_path("orders") + f"?since={version}&wait=10",
                                 *(["Connection: close"] if i % 2 else [])))
        streams = [await served.connect() for _ in range(20)]
        for reader, writer in streams:
            writer.write(request("/events?queue=orders"))
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            await read_event(reader, b": ready")
        await asyncio.sleep(0.2)
        with broken_direct_path(after=5):
            await served.stop_queue("orders", 1)
            for reader, _ in polls:
                lines, body = await read_answer(reader)
                assert lines[0] == "HTTP/1.1 200 OK" and json.loads(body)["flowStopped"]
            for reader, _ in streams:
                assert b'"flowStopped":true' in await read_event(reader, b"event: flow")
        await served.stop_queue("orders", 1000)  # and the next wake-up works too
        for reader, _ in streams:
            assert b'"flowStopped":false' in await read_event(reader, b"event: flow")
        failed = errors(caplog)
        assert len(failed) == 1 and "direct" in failed[0].getMessage()
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
        for _, writer in polls + streams:
            writer.close()


async def test_garbage_behind_a_pipelined_request_leaks_nothing(
        make_api: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    """A parked poll, a request pipelined behind it and a byte of garbage, from a client
    that then leaves: uvicorn closes the connection and marks only the pipelined request
    disconnected. No request task may stay behind (they count against the concurrency
    limit: every request would be a 503), no socket in CLOSE-WAIT, no traceback."""
    async with serving(make_api, limit_concurrency=30) as served:
        version = await served.version("orders")
        kept = []
        for i in range(60):
            reader, writer = await served.connect()
            poll = flow_path("orders") + f"?since={version}&wait=2"
            writer.write(request(poll, *(["Connection: close"] if i % 3 == 0 else []))
                         + request(flow_path("orders")) + b"\x00")
            if i % 2:
                kept.append(reader)
            else:
                writer.close()
        await asyncio.sleep(0.3)
        await served.stop_queue("orders", 1)  # a wake-up over closed connections
        for reader in kept:  # answered or closed, never left hanging
            with pytest.raises(asyncio.IncompleteReadError):
                while True:
                    await asyncio.wait_for(reader.readexactly(1), 5)
        await until(lambda: served.tasks == 0, timeout=5)
        reader, writer = await served.connect()
        writer.write(request("/healthz", "Connection: close"))
        lines, _ = await read_answer(reader)
        assert lines[0] == "HTTP/1.1 200 OK"
        await until(lambda: close_wait(served.port) == 0, timeout=5)
        assert tracebacks(caplog) == []


async def long_request(served: Served, behind: str
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with a parked long poll or an open SSE stream on it."""
    version = await served.version("orders")
    reader, writer = await served.connect()
    if behind == "poll":
        writer.write(request(flow_path("orders") + f"?since={version}&wait=30"))
    else:
        writer.write(request("/events?queue=orders"))
        await read_event_start(reader)
    await asyncio.sleep(0.1)
    return reader, writer


@pytest.mark.parametrize("behind", ["poll", "stream"])
async def test_headers_pipelined_behind_a_long_request_meet_the_cap(
        make_api: Callable[..., Any], behind: str) -> None:
    async with serving(make_api) as served:
        reader, writer = await long_request(served, behind)
        writer.write(b"GET /flow/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            for _ in range(64):  # 4 MB of one endless header, refused after 64 KiB
                writer.write(b"X-Padding: " + b"a" * 65_536 + b"\r\n")
                await asyncio.wait_for(writer.drain(), 5)
            await asyncio.wait_for(reader.read(1 << 20), 5)
            while True:
                await asyncio.wait_for(reader.readexactly(1), 5)
        await until(lambda: served.connections == 0 and served.tasks == 0)


@pytest.mark.parametrize("behind", ["poll", "stream"])
async def test_headers_pipelined_behind_a_long_request_meet_the_deadline(
        make_api: Callable[..., Any], behind: str) -> None:
    async with serving(make_api, header_timeout=1.0) as served:
        reader, writer = await long_request(served, behind)
        writer.write(b"GET /flow/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(asyncio.IncompleteReadError):
            while True:
                await asyncio.wait_for(reader.readexactly(1), 5)
        assert loop.time() - began < 3  # the 1 s deadline and a sweep's lateness
        await until(lambda: served.connections == 0 and served.tasks == 0)


async def read_event_start(reader: asyncio.StreamReader) -> None:
    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    await read_event(reader, b": ready")


async def test_no_client_can_make_the_sidecar_log_a_traceback(
        make_api: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    """A long poll served by the route (`wait=1e0` is the route's) and an SSE stream on
    connections uvicorn closed (garbage behind a pipelined request)."""
    async with serving(make_api) as served:
        version = await served.version("orders")
        for _ in range(5):
            _, writer = await served.connect()
            writer.write(request(flow_path("orders") + f"?since={version}&wait=1e0")
                         + request(flow_path("orders")) + b"\x00")
            _, writer = await served.connect()
            writer.write(request("/events?queue=orders") + request("/healthz") + b"\x00")
        await asyncio.sleep(0.3)
        await served.stop_queue("orders", 1)
        await asyncio.sleep(1.5)
        await until(lambda: served.tasks == 0)
        assert tracebacks(caplog) == []


async def test_a_graceful_stop_answers_every_waiter_cleanly(
        make_api: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    async with serving(make_api, timeout_graceful_shutdown=2) as served:
        version = await served.version("orders")
        parked = [await served.connect() for _ in range(10)]
        for _, writer in parked:
            writer.write(request(flow_path("orders") + f"?since={version}&wait=60"))
        routed = [await served.connect() for _ in range(5)]
        for _, writer in routed:  # the route's long poll
            writer.write(request(flow_path("orders") + f"?since={version}&wait=6e1"))
        streams = [await served.connect() for _ in range(5)]
        for reader, writer in streams:
            writer.write(request("/events?queue=orders"))
            await read_event_start(reader)
        await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        began = loop.time()
        served.stop()
        for reader, _ in parked + routed:
            lines, body = await read_answer(reader, timeout=5)
            assert lines[0] in ("HTTP/1.1 200 OK", "HTTP/1.1 503 Service Unavailable")
            if lines[0].endswith("200 OK"):
                assert json.loads(body)["version"] == version
            else:
                assert any(line.lower().startswith("retry-after:") for line in lines)
        for reader, _ in streams:  # the chunked body ended, not cut
            rest = await asyncio.wait_for(reader.read(), 5)
            assert rest.endswith(b"0\r\n\r\n")
        assert loop.time() - began < 2
        await until(lambda: served.tasks == 0)
    assert errors(caplog) == [] and tracebacks(caplog) == []
