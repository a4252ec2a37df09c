"""Passive declares, many in flight: an AMQP 0-9-1 connection that only asks queues their depth.

pika's BlockingConnection sends a `queue.declare` and waits for its answer before it sends
the next, and spends about as much of our CPU on each as the broker does. At 1,000 queues
near their stop, each read every 250 ms, that is 4,000 declares a second, more than a core
on both sides. This connection keeps one declare in flight on each of `window` channels
(AMQP allows one synchronous request a channel at a time), writes every declare it can in
one `send` and reads the answers as they come: the broker's reader takes many frames a read
and its channel processes answer in parallel, so a declare costs the broker about a third
of what it did and the sidecar a quarter to a third
(docs/benchmarks.md#what-the-declares-cost).

Declares and their answers, the only frames of the hot path, are encoded and decoded here by
hand (a declare's bytes are kept per queue name); the handshake and anything unusual go
through pika's codec (`pika.frame`, `pika.spec`), and pika parses the URL. The broker
answers a passive declare of a queue that is gone (404), refused (403) or another
connection's exclusive queue (405) by closing that channel: the answer says so and the
channel is opened again while the others go on. One thread uses a connection at a time.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pika  # type: ignore[import-untyped]  # pika ships no type information
import pika.credentials  # type: ignore[import-untyped]
import pika.frame  # type: ignore[import-untyped]
import pika.spec  # type: ignore[import-untyped]

from sidecar.broker import BrokerError

_HEADER = struct.Struct(">BHI")  # frame type, channel, payload size
_IDS = struct.Struct(">HH")  # a method's class and method
_COUNTS = struct.Struct(">II")  # declare-ok's message and consumer counts
FRAME_END = 0xCE
METHOD, HEARTBEAT_FRAME = 1, 8
DECLARE_OK = (50, 11)
CHANNEL_OPEN_OK, CHANNEL_CLOSE = (20, 11), (20, 40)
CONNECTION_CLOSE = (10, 50)
HEARTBEAT = bytes((HEARTBEAT_FRAME, 0, 0, 0, 0, 0, 0, FRAME_END))
_END = bytes((FRAME_END,))
SILENT_BEATS = 3  # heartbeat intervals without a byte from the broker: it is gone or hung
READ_SIZE = 1 << 18
KEPT_DECLARES = 1 << 16  # encoded declares kept by queue name; queues come and go


class WireError(BrokerError):
    """The connection cannot go on: the broker closed it, or spoke out of protocol."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one passive declare told: the queue's ready and consumer counts, or, when the
    broker closed the channel instead, its reply (`refused`: code and text)."""

    ready: int | None
    consumers: int
    at: float  # the caller's clock, before the declare was sent
    took: float  # seconds from sending it to reading its answer
    refused: tuple[int, str] | None = None


def _method_frame(channel: int, method: Any) -> bytes:
    return bytes(pika.frame.Method(channel, method).marshal())


class PassiveDeclares:
    """One connection to one vhost, `window` channels, passive declares only."""

    def __init__(self, params: pika.ConnectionParameters, *, window: int, name: str,
                 timeout: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        """Connect and shake hands (blocking, up to `timeout` a step); OSError or WireError
        when the broker cannot be reached or refuses (its reply says why)."""
        if not isinstance(params.credentials, pika.credentials.PlainCredentials):
            raise WireError("live depth logs in with a user name and password (PLAIN) only")
        self._monotonic = monotonic
        self._buffer = bytearray()
        self._early: deque[tuple[int, tuple[int, int], bytes]] = deque()  # read, not taken
        self._declares: dict[str, bytes] = {}  # a queue's declare payload, by name
        self._sock = socket.create_connection((params.host, params.port), timeout)
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if params.ssl_options is not None:
                tls = params.ssl_options
                self._sock = tls.context.wrap_socket(
                    self._sock, server_hostname=tls.server_hostname or params.host)
            self._sock.settimeout(timeout)
            self._heard = self._said = monotonic()
            self.heartbeat = 0
            self.server_properties = self._handshake(params, window, name)
        except BaseException:
            self._sock.close()
            raise

    # -- the hot path ------------------------------------------------------------------
    def ask(self, names: Sequence[str], clock: Callable[[], float],
            out: dict[int, Answer]) -> None:
        """Declare every queue of `names` passively, `window` at a time, and put each answer
        in `out` under its index in `names` as it comes, so that what was read before a
        failure is kept; OSError (a timeout included) or WireError when the connection
        fails."""
        todo: Iterator[tuple[int, str]] = iter(enumerate(names))
        asked: dict[int, tuple[int, float, float]] = {}  # channel: (index, at, sent)
        free = list(self._channels)
        opening: set[int] = set()  # channels the broker closed, being opened again
        while True:
            frames: list[bytes] = []
            at, sent = clock(), self._monotonic()
            while free:
                item = next(todo, None)
                if item is None:
                    break
                channel = free.pop()
                asked[channel] = (item[0], at, sent)
                frames.append(self._declare(channel, item[1]))
            if frames:
                self._send(b"".join(frames))
            if not asked and not opening:
                return
            for channel, ids, payload in self._read():
                if ids == DECLARE_OK:
                    if channel not in asked:
                        raise WireError(f"an answer nobody asked for, on channel {channel}")
                    index, at, sent = asked.pop(channel)
                    ready, consumers = _COUNTS.unpack_from(payload, 5 + payload[4])
                    out[index] = Answer(ready, consumers, at, self._heard - sent)
                    free.append(channel)
                elif ids == CHANNEL_CLOSE:
                    close = self._decode(payload)
                    if channel in asked:
                        index, at, sent = asked.pop(channel)
                        out[index] = Answer(None, 0, at, self._heard - sent,
                                            (close.reply_code, str(close.reply_text)))
                    self._send(_method_frame(channel, pika.spec.Channel.CloseOk())
                               + _method_frame(channel, pika.spec.Channel.Open()))
                    opening.add(channel)
                    if channel in free:  # closed unasked: nothing goes on it until open
                        free.remove(channel)
                elif ids == CHANNEL_OPEN_OK and channel in opening:
                    opening.discard(channel)
                    free.append(channel)

    def keep_alive(self) -> None:
        """Between rounds: read what the broker sent meanwhile (heartbeats, a close), send a
        heartbeat when ours is due; WireError when the broker has been silent for
        SILENT_BEATS heartbeat intervals (hung, or the network is gone)."""
        while self._readable():
            for _ in self._read():  # only heartbeats come unasked, or a close (raises)
                pass
        now = self._monotonic()
        if self.heartbeat and now - self._heard > SILENT_BEATS * self.heartbeat:
            raise WireError(f"no heartbeat from the broker for {now - self._heard:.0f} s")
        if self.heartbeat and now - self._said >= self.heartbeat / 2:
            self._send(HEARTBEAT)

    def close(self) -> None:
        """Close politely (the broker logs a socket closed without `connection.close` as
        unexpected) and without waiting long: the broker may be gone or hung."""
        try:
            self._sock.settimeout(min(1.0, self._sock.gettimeout() or 1.0))
            self._send(_method_frame(0, pika.spec.Connection.Close(200, "live depth closing",
                                                                   0, 0)))
            self._read()  # its close-ok, when it comes within the second
        except (OSError, WireError):
            pass  # going away is how a broken connection closes
        finally:
            self._sock.close()

    # -- frames ------------------------------------------------------------------------
    def _declare(self, channel: int, name: str) -> bytes:
        payload = self._declares.get(name)
        if payload is None:
            if len(self._declares) >= KEPT_DECLARES:
                self._declares.clear()
            queue = name.encode()
            if len(queue) > 255:
                raise WireError(f"queue name of {len(queue)} bytes: AMQP allows 255")
            # queue.declare: reserved short, queue, bits (passive only), no arguments
            payload = self._declares[name] = (
                struct.pack(">HHHB", 50, 10, 0, len(queue)) + queue + b"\x01\0\0\0\0")
        return _HEADER.pack(METHOD, channel, len(payload)) + payload + _END

    def _read(self) -> list[tuple[int, tuple[int, int], bytes]]:
        """The method frames of one read (blocking up to the socket's timeout), each as
        (channel, (class, method), payload); heartbeats are taken as signs of life. A
        connection.close from the broker is answered and raised as WireError."""
        data = self._sock.recv(READ_SIZE)
        if not data:
            raise WireError("the broker closed the connection")
        self._heard = self._monotonic()
        buffer = self._buffer
        buffer += data
        frames, at, end = [], 0, len(buffer)
        while end - at >= 8:
            kind, channel, size = _HEADER.unpack_from(buffer, at)
            stop = at + 7 + size
            if stop >= end:
                break
            if buffer[stop] != FRAME_END:
                raise WireError("a frame without its end marker: not AMQP 0-9-1")
            if kind == METHOD:
                payload = bytes(buffer[at + 7:stop])
                ids = _IDS.unpack_from(payload)
                if ids == CONNECTION_CLOSE:
                    self._closed_by_broker(payload)
                frames.append((channel, ids, payload))
            at = stop + 1
        del buffer[:at]
        return frames

    def _closed_by_broker(self, payload: bytes) -> None:
        close = self._decode(payload)
        try:
            self._send(_method_frame(0, pika.spec.Connection.CloseOk()))
        except OSError:
            pass  # it is closing anyway
        raise WireError(f"the broker closed the connection: {close.reply_code} "
                        f"{close.reply_text}")

    @staticmethod
    def _decode(payload: bytes) -> Any:
        method = pika.spec.methods[struct.unpack_from(">I", payload)[0]]()
        method.decode(payload, 4)
        return method

    def _send(self, data: bytes) -> None:
        self._sock.sendall(data)
        self._said = self._monotonic()

    def _readable(self) -> bool:
        pending = getattr(self._sock, "pending", None)  # TLS: bytes already decrypted
        if pending is not None and pending():
            return True
        poll = select.poll()  # not select(): the sidecar's descriptors go far above 1,024
        poll.register(self._sock, select.POLLIN)
        return bool(poll.poll(0))

    def _expect(self, ids: tuple[int, int]) -> Any:
        """The next method of the handshake, decoded; WireError if it is another."""
        while not self._early:
            self._early.extend(self._read())
        _, got, payload = self._early.popleft()
        if got != ids:
            raise WireError(f"expected method {ids} in the handshake, the broker sent {got}")
        return self._decode(payload)

    def _handshake(self, params: pika.ConnectionParameters, window: int,
                   name: str) -> dict[str, Any]:
        """Protocol header, start/start-ok, tune/tune-ok, open, then `window` channels."""
        self._send(bytes(pika.frame.ProtocolHeader().marshal()))
        start = self._expect((10, 10))
        credentials = params.credentials
        self._send(_method_frame(0, pika.spec.Connection.StartOk(
            {"connection_name": name, "product": "flow-sidecar"}, "PLAIN",
            f"\0{credentials.username}\0{credentials.password}".encode(), params.locale)))
        tune = self._expect((10, 30))
        window = min(window, tune.channel_max or window)
        self.heartbeat = params.heartbeat if params.heartbeat is not None else tune.heartbeat
        self._send(_method_frame(0, pika.spec.Connection.TuneOk(
            window, tune.frame_max, self.heartbeat)))
        self._send(_method_frame(0, pika.spec.Connection.Open(params.virtual_host)))
        self._expect((10, 41))
        self._channels = range(1, window + 1)
        self._send(b"".join(_method_frame(channel, pika.spec.Channel.Open())
                            for channel in self._channels))
        for _ in self._channels:
            self._expect(CHANNEL_OPEN_OK)
        return dict(start.server_properties or {})
