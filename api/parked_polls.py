"""Long polls of `GET /flow/...` parked until their queue changes, answered in one loop.

A long poll that has to wait is parked here with its connection (`api.direct_writes`).
When the queue's version changes (an engine version watcher), one task encodes the answer
once and writes the same bytes to every parked connection of that queue, giving the event
loop a turn every `WAKE_SLICE_SECONDS` and keeping garbage collections out of the writes;
only then are the responses finished (connections closed or kept for the next request:
the last answer waits for writes only) and the waiting requests' coroutines woken, to note
their producers and end. The answer is the queue's at the wake-up: the producers it counts
are those known before it (those woken are noted after the writes).

A request whose wait ends first, or whose answer could not be written directly, answers
itself through `send` (`FlowAnswers` in `api.flow_fast_path`).

A request that asked for `Connection: close` stops reading its connection while parked:
its client closes as soon as it has its answer, and each close the event loop saw during
a wake-up's writes cost a read event, an empty `recv` and the close path of a transport,
between the writes. In the wake-up bench (2026-11-27, 10,000 long polls, 2 clients) a
client that had all its answers closed its 5,000 connections while the other's were still
being written: 117-197 ms of a round went to those closes. Unread, a close is only the
kernel's until `finish` closes the connection anyway. The price: a client that leaves
while parked is noticed only when its wait ends (at most `MAX_WAIT`), as its request's
task already was.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from api.answers import Answers
from api.direct_writes import finish, whole_answers, write_whole
from sidecar.flow.slices import collections_deferred, in_slices
from sidecar.model import QueueKey
from sidecar.signals.change_fanout import WAKE_SLICE_SECONDS, WakeUp, each_written

#: What a producer's headers say about it: (producer id or None, capacity, byte capacity or
#: None). A plain tuple: a NamedTuple costs twice the header parsing on the hot path.
Declared = tuple[str | None, int, int | None]
FLOW_HEADERS = ((b"content-type", b"application/json"), (b"cache-control", b"no-store"))


@dataclass(eq=False)  # identity: a parked request is a key of its queue's group
class Parked:
    """One waiting request."""

    cycle: RequestResponseCycle
    producer: Declared
    asked_at: float
    woken: asyncio.Future[None]
    answered: bool = False  # its answer was written (or its client left)
    left: bool = False  # it stopped waiting before the wake-up reached it
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class ParkedPolls:
    """The parked requests per queue; see the module docstring."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self._parked: dict[QueueKey, dict[Parked, None]] = {}  # insertion-ordered sets
        self._wakes: set[asyncio.Task[None]] = set()
        self.last_wakeup: WakeUp | None = None

    @property
    def waiting(self) -> int:
        """Requests parked now."""
        return sum(len(group) for group in self._parked.values())

    async def wait(self, key: QueueKey, cycle: RequestResponseCycle, producer: Declared,
                   asked_at: float, seconds: float) -> bool:
        """Park until the queue's version changes or `seconds` pass; True when the wake-up
        answered the request (or its client left), False when the caller must."""
        loop = asyncio.get_running_loop()
        if not cycle.keep_alive:  # unread, its client's close costs a wake-up nothing
            cycle.flow.pause_reading()
        parked = Parked(cycle, producer, asked_at, loop.create_future())
        parked.timer = loop.call_later(seconds, _expire, parked.woken)
        self._parked.setdefault(key, {})[parked] = None
        try:
            await parked.woken
        finally:
            parked.timer.cancel()
            if parked.answered:
                finish(cycle)  # its wait ended between the wake-up's writes and their end
            else:
                parked.left = True
                group = self._parked.get(key)
                if group is not None:
                    group.pop(parked, None)
                    if not group:
                        del self._parked[key]
        return parked.answered

    def on_version(self, key: QueueKey) -> None:
        """Engine version watcher: answer every request parked on the queue."""
        group = self._parked.pop(key, None)
        if group:
            task = asyncio.get_running_loop().create_task(
                self._wake(key, list(group), time.perf_counter()))
            self._wakes.add(task)
            task.add_done_callback(self._wakes.discard)

    async def _wake(self, key: QueueKey, parked: list[Parked], since: float) -> None:
        entry = self.answers.engine.entry(key)
        if entry is not None:  # gone: every request answers itself (a 404 that says why)
            encoded = whole_answers(parked[-1].cycle.default_headers, FLOW_HEADERS,
                                    self.answers.flow_body(entry))

            def write(one: Parked) -> None:
                if not one.left:
                    one.answered = write_whole(one.cycle, encoded)

            cpu = time.process_time()
            with collections_deferred():
                await in_slices(each_written(parked, write), WAKE_SLICE_SECONDS)
            self.last_wakeup = WakeUp(len(parked), time.perf_counter() - since,
                                      time.process_time() - cpu)
        now = time.time()

        def settle(one: Parked) -> None:
            if one.answered:
                finish(one.cycle)
            producer_id, capacity, capacity_bytes = one.producer
            if one.answered and producer_id is not None and entry is not None:
                self.answers.record_producer(entry, producer_id, capacity, now,
                                             capacity_bytes=capacity_bytes,
                                             asked_at=one.asked_at)
            if not one.woken.done():
                one.woken.set_result(None)

        await in_slices(each_written(parked, settle), WAKE_SLICE_SECONDS)


def _expire(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
