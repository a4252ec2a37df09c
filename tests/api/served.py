"""The in-process sidecar served by a real uvicorn on a loopback port, on uvloop as
`flow-sidecar` serves: what the edge's wire tests (`tests/api/test_edge_*.py`,
`tests/api/test_direct_wakeups.py`) talk to over real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from api.edge.connection_limits import guarded_protocol
from api.edge.parked_polls import ParkedPolls
from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import free_port

#: anyio's backend for these tests: asyncio on uvloop, where writing to a closed transport
#: raises (asyncio's own loop is silent about it)
UVLOOP = ("asyncio", {"use_uvloop": True})


class Served:
    """One sidecar and the uvicorn server serving it."""

    def __init__(self, api: InProcessAPI, server: uvicorn.Server, port: int) -> None:
        self.api, self.server, self.port = api, server, port

    def stop(self) -> None:
        """Begin a graceful shutdown, as SIGTERM does."""
        self.server.should_exit = True

    @property
    def parked(self) -> ParkedPolls:
        """The fast path's parked long polls."""
        parked: ParkedPolls = self.api.sidecar.asgi.app.parked  # type: ignore[attr-defined]
        return parked

    @property
    def tasks(self) -> int:
        """Request tasks the server runs now (what its concurrency limit counts)."""
        return len(self.server.server_state.tasks)

    @property
    def connections(self) -> int:
        return len(self.server.server_state.connections)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def stop_queue(self, queue: str, stop: int) -> None:
        answer = await self.api.client.put(queue_path(queue) + "/flow",
                                           json={"qpid.flow_stop_count": stop})
        assert answer.status_code == 200
        await self.api.poll()  # a release waits for a fresh depth

    async def version(self, queue: str) -> int:
        version: int = (await self.api.client.get(flow_path(queue))).json()["version"]
        return version


@contextlib.asynccontextmanager
async def serving(make_api: Callable[..., Any], *, header_timeout: float = 10.0,
                  settings: dict[str, Any] | None = None,
                  **config: Any) -> AsyncIterator[Served]:
    """A sidecar with queue `orders` and `settings`, served until the block ends
    (uvicorn's own options in `config`); uvicorn logs to the root logger, where caplog
    sees it."""
    api: InProcessAPI = await make_api(**(settings or {}))
    api.broker.queue("orders", 3, 30)
    await api.poll()
    port = free_port()
    options: dict[str, Any] = {"timeout_graceful_shutdown": 1,
                               "http": guarded_protocol(header_timeout), **config}
    server = uvicorn.Server(uvicorn.Config(
        api.sidecar.asgi, host="127.0.0.1", port=port, lifespan="off", log_config=None,
        access_log=False, **options))
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield Served(api, server, port)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


def request(path: str, *headers: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]).encode()


async def read_answer(reader: asyncio.StreamReader,
                      timeout: float = 5) -> tuple[list[str], bytes]:
    """(header lines, body) of one answer with a content-length."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)).decode()
    lines = head.split("\r\n")[:-2]
    length = next(int(line.split(":")[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    return lines, await reader.readexactly(length)


async def read_event(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    """Chunked body parts up to the one holding `marker`, checking the framing."""
    while True:
        size = int((await asyncio.wait_for(reader.readline(), 5)).strip(), 16)
        part = await reader.readexactly(size + 2)
        assert part.endswith(b"\r\n")
        if marker in part:
            return part[:-2]


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `check()` holds; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "not true in time"
        await asyncio.sleep(0.01)


def close_wait(port: int) -> int:
    """Sockets of the server's port in CLOSE-WAIT (the client closed, the server never
    did), from /proc/net/tcp."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "08":
            count += 1
    return count


@contextlib.contextmanager
def broken_direct_path(after: int) -> Iterator[None]:
    """The direct path's writes raise from the `after`-th on, as a renamed field of the
    server's would (an AttributeError inside the wake-up)."""
    from api.edge import direct_writes, parked_polls

    calls = 0
    begin, call, around = (parked_polls.begin_whole, direct_writes.ChunkWriter.__call__,
                           direct_writes.ChunkWriter.around_loop)

    def counted(real: Callable[..., Any]) -> Callable[..., Any]:
        def broken(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls > after:
                raise AttributeError("'RequestResponseCycle' object has no attribute 'x'")
            return real(*args)
        return broken

    parked_polls.begin_whole = counted(begin)  # type: ignore[assignment]
    direct_writes.ChunkWriter.__call__ = counted(call)  # type: ignore[method-assign]
    direct_writes.ChunkWriter.around_loop = counted(around)  # type: ignore[method-assign]
    try:
        yield
    finally:
        parked_polls.begin_whole = begin
        direct_writes.ChunkWriter.__call__ = call  # type: ignore[method-assign]
        direct_writes.ChunkWriter.around_loop = around  # type: ignore[method-assign]
