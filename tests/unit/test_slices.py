"""Garbage collection kept out of a wake-up's writes (`collections_deferred`), and work in
slices that lets a request through between two slices (`in_slices`)."""

from __future__ import annotations

import asyncio
import gc
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvloop

from sidecar.flow.slices import Steps, collections_deferred, in_slices


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_no_collection_inside_and_the_collector_back_after() -> None:
    with collections_deferred():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_bursts_turn_it_back_on_only_when_the_last_ends() -> None:
    first, second = collections_deferred(), collections_deferred()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first burst ends while the second still writes
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_failing_burst_turns_it_back_on() -> None:
    with pytest.raises(RuntimeError), collections_deferred():
        raise RuntimeError("a write failed")
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with collections_deferred():
        pass
    assert not gc.isenabled()


SLICE_BUSY = 0.02  # seconds each step of the work below holds the loop


def slices_before_an_answer(loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> int:
    """Work in slices on the loop while a client, connected before, sends one request over
    loopback in the middle of a slice: how many slices ended between that moment and the
    request's answer."""
    log: list[str] = []

    def work() -> Steps[None]:
        for _ in range(30):
            deadline = time.perf_counter() + SLICE_BUSY
            while time.perf_counter() < deadline:
                pass
            log.append("slice")
            yield

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                if line == b"GET\n":
                    log.append("answered")
                writer.write(b"ok\n")

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        conn = socket.create_connection(server.sockets[0].getsockname()[:2])
        await asyncio.get_running_loop().run_in_executor(None, lambda: (
            conn.sendall(b"hello\n"), conn.recv(16)))  # connected, its reader waiting

        def client() -> None:
            while log.count("slice") < 5:
                time.sleep(0.001)
            time.sleep(SLICE_BUSY / 2)  # in the middle of a slice
            log.append("sent")
            conn.sendall(b"GET\n")
            conn.recv(16)

        sender = threading.Thread(target=client)
        sender.start()
        await in_slices(work(), 0.0)
        sender.join()
        conn.close()
        server.close()

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the client's note and its send: microseconds apart
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(main())
    finally:
        sys.setswitchinterval(switching)
    sent, answered = log.index("sent"), log.index("answered")
    return log[sent:answered].count("slice")


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop],
                         ids=["uvloop", "asyncio"])
def test_a_request_that_arrives_during_a_slice_is_answered_before_the_next(
        loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    """Giving the loop one turn between slices answered it only after the next slice:
    the turn reads the request and queues its task behind the work's (`give_way`)."""
    assert slices_before_an_answer(loop_factory) <= 1
