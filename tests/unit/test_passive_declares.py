"""PassiveDeclares against a scripted AMQP 0-9-1 peer on a loopback socket: declares in
flight on every channel at once, answers cut anywhere between reads, a channel the broker
closes, a connection it closes, heartbeats. The real broker is in
tests/integration/test_live_depth.py; this checks what a real broker will not show on
demand (how the bytes are cut, the order things arrive in)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pika
import pika.frame
import pika.spec
import pytest

from sidecar.broker.passive_declares import HEARTBEAT, Answer, PassiveDeclares, WireError
from tests.utils.clock import Clock

WINDOW = 4


class Peer:
    """The broker's side of one connection, frame by frame (pika's codec)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def frame(self) -> pika.frame.Frame:
        while True:
            used, frame = pika.frame.decode_frame(self.buffer)
            if frame is not None:
                self.buffer = self.buffer[used:]
                return frame
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.buffer += data

    def method(self) -> pika.frame.Method:
        while not isinstance(frame := self.frame(), pika.frame.Method):
            pass
        return frame

    def send(self, channel: int, method: object) -> None:
        self.sock.sendall(pika.frame.Method(channel, method).marshal())

    def handshake(self) -> None:
        assert self.sock.recv(8) == b"AMQP\x00\x00\x09\x01"
        self.send(0, pika.spec.Connection.Start(server_properties={"cluster_name": "ours"},
                                                mechanisms="PLAIN", locales="en_US"))
        start_ok = self.method().method
        assert start_ok.mechanism == "PLAIN" and start_ok.response == b"\0u\0p"
        self.send(0, pika.spec.Connection.Tune(2047, 131072, 60))
        assert isinstance(self.method().method, pika.spec.Connection.TuneOk)
        assert self.method().method.virtual_host == "v"
        self.send(0, pika.spec.Connection.OpenOk())
        for _ in range(WINDOW):
            channel = self.method().channel_number
            self.send(channel, pika.spec.Channel.OpenOk())


@contextmanager
def peer(script: Callable[[Peer], None]) -> Iterator[PassiveDeclares]:
    """A PassiveDeclares connected to a peer that shakes hands, then runs `script`."""
    listener = socket.create_server(("127.0.0.1", 0))
    failures: list[BaseException] = []

    def serve() -> None:
        sock, _ = listener.accept()
        with sock:
            try:
                them = Peer(sock)
                them.handshake()
                script(them)
            except BaseException as exc:  # noqa: BLE001  (raised in the test's thread)
                failures.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    params = pika.URLParameters(f"amqp://u:p@127.0.0.1:{port}/v?heartbeat=2")
    connection = PassiveDeclares(params, window=WINDOW, name="test", timeout=5.0)
    try:
        yield connection
    finally:
        connection.close()
        thread.join(5)
        listener.close()
    if failures:
        raise failures[0]


def declares(them: Peer, count: int) -> list[tuple[int, str]]:
    """The next `count` declares the peer reads: (channel, queue), each a passive one."""
    got = []
    for _ in range(count):
        frame = them.method()
        assert isinstance(frame.method, pika.spec.Queue.Declare) and frame.method.passive
        got.append((frame.channel_number, frame.method.queue))
    return got


def answer(channel: int, queue: str, ready: int) -> bytes:
    return pika.frame.Method(channel, pika.spec.Queue.DeclareOk(queue, ready, 1)).marshal()


def test_a_declare_is_in_flight_on_every_channel_before_any_answer_and_cut_answers_join() -> None:
    def script(them: Peer) -> None:
        pending = declares(them, WINDOW)  # all of them before it answers one
        assert sorted(channel for channel, _ in pending) == list(range(1, WINDOW + 1))
        to_come = 10 - WINDOW
        while pending:
            channel, queue = pending.pop(0)
            for byte in answer(channel, queue, int(queue[1:]) * 10):  # a byte a segment
                them.sock.sendall(bytes([byte]))
            if to_come:  # its channel is free again: the next declare goes out on it
                pending += declares(them, 1)
                assert pending[-1][0] == channel
                to_come -= 1

    out: dict[int, Answer] = {}
    with peer(script) as connection:
        connection.ask([f"q{i}" for i in range(10)], Clock(100.0), out)
    assert {index: a.ready for index, a in out.items()} == {i: i * 10 for i in range(10)}
    assert all(a.consumers == 1 and a.at == 100.0 and a.refused is None for a in out.values())


def test_a_channel_the_broker_closes_is_opened_again_and_the_others_go_on() -> None:
    def script(them: Peer) -> None:
        pending = {queue: channel for channel, queue in declares(them, 3)}
        gone = pending.pop("gone")
        them.send(gone, pika.spec.Channel.Close(404, "NOT_FOUND - no queue 'gone'", 50, 10))
        assert isinstance(them.method().method, pika.spec.Channel.CloseOk)
        reopen = them.method()
        assert isinstance(reopen.method, pika.spec.Channel.Open)
        assert reopen.channel_number == gone
        them.send(gone, pika.spec.Channel.OpenOk())
        for queue, channel in pending.items():
            them.sock.sendall(answer(channel, queue, 7))
        # the next ask uses the channel opened again like any other
        for channel, queue in declares(them, 1):
            them.sock.sendall(answer(channel, queue, 8))

    out: dict[int, Answer] = {}
    later: dict[int, Answer] = {}
    with peer(script) as connection:
        connection.ask(["a", "gone", "b"], Clock(), out)
        connection.ask(["c"], Clock(), later)
    assert out[1].ready is None and out[1].refused == (404, "NOT_FOUND - no queue 'gone'")
    assert (out[0].ready, out[2].ready, later[0].ready) == (7, 7, 8)


def test_a_connection_the_broker_closes_raises_and_keeps_what_was_read() -> None:
    def script(them: Peer) -> None:
        first, *_ = declares(them, 2)
        them.sock.sendall(answer(*first, 3))
        them.send(0, pika.spec.Connection.Close(320, "CONNECTION_FORCED - shutdown", 0, 0))
        assert isinstance(them.method().method, pika.spec.Connection.CloseOk)

    out: dict[int, Answer] = {}
    with peer(script) as connection, pytest.raises(WireError, match="320 CONNECTION_FORCED"):
        connection.ask(["a", "b"], Clock(), out)
    assert [a.ready for a in out.values()] == [3]


def test_keep_alive_sends_a_heartbeat_when_due_and_gives_up_on_a_silent_broker() -> None:
    heard, checked = threading.Event(), threading.Event()

    def script(them: Peer) -> None:
        while not isinstance(them.frame(), pika.frame.Heartbeat):
            pass
        heard.set()
        checked.wait(5)  # silent, the connection still open

    now = [0.0]
    with peer(script) as connection:
        connection._monotonic = lambda: now[0]
        connection._heard = connection._said = 0.0
        connection.keep_alive()  # nothing due yet
        assert not heard.is_set()
        now[0] = 1.0  # half of the 2 s heartbeat
        connection.keep_alive()
        assert heard.wait(5)
        now[0] = 6.5  # three intervals without a byte from the broker
        with pytest.raises(WireError, match="no heartbeat"):
            connection.keep_alive()
        checked.set()
    assert HEARTBEAT[0] == 8 and HEARTBEAT[-1] == 0xCE


def test_a_refused_login_says_what_the_broker_said() -> None:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        sock, _ = listener.accept()
        with sock:
            them = Peer(sock)
            assert sock.recv(8).startswith(b"AMQP")
            them.send(0, pika.spec.Connection.Start(server_properties={},
                                                    mechanisms="PLAIN", locales="en_US"))
            them.method()
            them.send(0, pika.spec.Connection.Close(403, "ACCESS_REFUSED - Login was refused",
                                                    10, 11))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    params = pika.URLParameters(f"amqp://u:p@127.0.0.1:{listener.getsockname()[1]}/v")
    with pytest.raises(WireError, match="403 ACCESS_REFUSED"):
        PassiveDeclares(params, window=WINDOW, name="test", timeout=5.0)
    thread.join(5)
    listener.close()
