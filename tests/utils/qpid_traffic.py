"""Messages into and out of real qpidd queues, with sizes as qpidd counts them.

qpidd counts a message's whole AMQP 1.0 encoding in `byteDepth` (and in its flow-control
size), not only the body. `Sizes` measures that overhead on the broker itself (a probe
message per body-length class: AMQP binaries below 256 bytes carry a 1-byte length, longer
ones a 4-byte one) and picks the body that makes a message exactly N bytes as qpidd counts
it. Every observation waits until qpidd's `msgDepth` shows what the test did (the traffic
and the QMF console are two connections, so a transfer may reach the queue a moment after
it was written), then reads the queue's figures once more.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import pytest

# Without Python's proton client the modules that drive qpidd are skipped, not errors.
pytest.importorskip("proton", reason="no Python AMQP 1.0 client (proton): run "
                    "deploy/ensure-qpidd.sh")

from proton import Message, Timeout
from proton.utils import BlockingConnection

from tests.utils.qpidd import Qpidd

SMALL, LARGE = 1, 300  # probe bodies of the two length classes
BINARY8_LIMIT = 256


@dataclass(frozen=True)
class Observed:
    """What qpidd reports about one queue through QMF."""

    messages: int
    bytes: int
    stopped: bool
    stopped_count: int
    enqueues: int = 0  # msgTotalEnqueues: tells a ring queue's new message from its last


class Traffic:
    """One AMQP 1.0 connection for sending and receiving on any queue of one qpidd."""

    def __init__(self, broker: Qpidd) -> None:
        self.broker = broker
        self.conn = BlockingConnection(f"127.0.0.1:{broker.port}", timeout=10)
        self._senders: dict[str, Any] = {}
        self._receivers: dict[str, Any] = {}
        self._overhead: dict[int, int] = {}

    def pump(self, seconds: float) -> None:
        """Let the connection do its I/O for a moment (transfers, dispositions)."""
        try:
            self.conn.wait(lambda: False, timeout=seconds, msg="")
        except Timeout:
            pass

    def send(self, queue: str, body_length: int) -> Any:
        """Send one message without waiting for qpidd to settle it (it holds settlement
        while the queue is flow stopped); returns the delivery."""
        sender = self._senders.get(queue)
        if sender is None:
            sender = self._senders[queue] = self.conn.create_sender(queue)
        # written out by the next pump (observe): settled or held, the depth tells
        return sender.link.send(Message(body=b"x" * body_length))

    def take(self, queue: str) -> int:
        """Consume and accept the oldest message; its body length."""
        receiver = self._receivers.get(queue)
        if receiver is None:
            receiver = self._receivers[queue] = self.conn.create_receiver(queue, credit=1)
        message = receiver.receive(timeout=10)
        receiver.accept()
        return len(message.body)

    def forget(self, queue: str) -> None:
        """Close this queue's links (before the queue is deleted)."""
        for links in (self._senders, self._receivers):
            link = links.pop(queue, None)
            if link is not None:
                link.close()

    def observe(self, queue: str, messages: int | None = None,
                enqueues: int | None = None) -> Observed:
        """The queue's figures once `msgDepth` is `messages` and `msgTotalEnqueues` is
        `enqueues` (at once when both are None)."""
        deadline = time.monotonic() + 10
        while True:
            found = self._read(queue)
            if messages in (None, found.messages) and enqueues in (None, found.enqueues):
                return self._read(queue) if messages is not None else found
            if time.monotonic() > deadline:
                raise AssertionError(f"{queue}: {found}, expected {messages} messages, "
                                     f"{enqueues} enqueues")
            self.pump(0.005)

    def _read(self, queue: str) -> Observed:
        for values in self.broker.console.query("queue"):
            if values.get("name") == queue:
                return Observed(int(values["msgDepth"]), int(values["byteDepth"]),
                                bool(values["flowStopped"]), int(values["flowStoppedCount"]),
                                int(values["msgTotalEnqueues"]))
        raise AssertionError(f"qpidd lists no queue {queue!r}")

    def overhead(self, body_length: int) -> int:
        """Bytes qpidd counts beyond the body, measured once per length class."""
        probe = SMALL if body_length < BINARY8_LIMIT else LARGE
        if probe not in self._overhead:
            name = f"flow-probe-{probe}"
            self.broker.console.call("create", {"type": "queue", "name": name})
            self.send(name, probe)
            self._overhead[probe] = self.observe(name, 1).bytes - probe
            self.take(name)
            self.forget(name)
            self.broker.console.call("delete", {"type": "queue", "name": name})
        return self._overhead[probe]

    def body_for(self, size: int) -> int:
        """The body length that makes a message `size` bytes as qpidd counts it."""
        small = size - self.overhead(SMALL)
        if 0 <= small < BINARY8_LIMIT:
            return small
        large = size - self.overhead(LARGE)
        if large >= BINARY8_LIMIT:
            return large
        raise ValueError(f"no message is {size} bytes as qpidd counts it")

    def close(self) -> None:
        self.conn.close()


class QueueUnderTest:
    """One queue: what the test put in (sizes, oldest first), and qpidd's view of it."""

    def __init__(self, traffic: Traffic, name: str) -> None:
        self.traffic = traffic
        self.name = name
        self.sizes: deque[int] = deque()
        self.enqueued = 0

    def enqueue(self, size: int, *, max_count: int | None = None) -> Observed:
        """Send one message of `size` bytes (qpidd's count); on a ring queue of
        `max_count` the oldest is dropped to make room."""
        self.traffic.send(self.name, self.traffic.body_for(size))
        self.enqueued += 1
        self.sizes.append(size)
        if max_count is not None and len(self.sizes) > max_count:
            self.sizes.popleft()
        return self.check()

    def dequeue(self) -> Observed:
        """Consume the oldest message."""
        self.traffic.take(self.name)
        self.sizes.popleft()
        return self.check()

    def check(self) -> Observed:
        """qpidd's figures, which must be what the test put in."""
        seen = self.traffic.observe(self.name, len(self.sizes), self.enqueued)
        assert seen.bytes == sum(self.sizes), (self.name, seen, list(self.sizes))
        return seen
