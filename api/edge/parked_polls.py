"""Long polls of `GET /flow/...` parked until their queue changes, answered in one loop.

A long poll that has to wait is parked here with its connection (`api.edge.direct_writes`).
When the queue's version changes (an engine version watcher), one task encodes the answer
once and writes the same bytes to every parked connection of that queue, giving the event
loop a turn every `WAKE_SLICE_SECONDS` and keeping garbage collections out of the writes;
only then are the responses finished (connections closed or kept for the next request:
the last answer waits for writes only) and the waiting requests' coroutines woken, to note
their producers and end. The answer is the queue's at the wake-up: the producers it counts
are those known before it (those woken are noted after the writes).

A wait that ends without a change is answered the same way: the requests whose waits end
together (long polls that began together, after the wake-up before, end together) are
answered by one task in slices, each queue's answer encoded once: a coroutine and a
`send` per ended wait, 1,000 in one turn of the loop, stalled `/flow` at the waiters'
rhythm (docs/benchmarks.md, "Soak"). A request whose answer could not be
written directly (a queue gone, writes paused) answers itself through `send`
(`api.edge.fast_path`). Every wake-up settles every request in a `finally`: if the
direct path raises, the requests not yet answered answer themselves through `send` and the
switch turns the direct path off (`api.edge.direct_writes.DirectSwitch`).

A request that asked for `Connection: close` stops reading its connection while parked:
its client closes as soon as it has its answer, and each close the event loop saw during
a wake-up's writes cost a read event, an empty `recv` and the close path of a transport,
between the writes (a tenth of a round or more: docs/benchmarks.md, "Long-poll
wake-up"). Unread, a close is only the
kernel's until `finish` closes the connection anyway. The price: a client that leaves
while parked is noticed only when its wait ends (at most `MAX_WAIT`), as its request's
task already was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from api.answers import Answers
from api.edge.direct_writes import (
    DirectSwitch,
    Headers,
    Link,
    begin_whole,
    finish,
    whole_answers,
)
from api.edge.paired_writes import shared, socket_fd, write_around
from api.edge.protocol import FLOW_HEADERS, Declared
from api.edge.wake_steps import WAKE_SLICE_SECONDS, WakeUp, each_written
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.slices import collections_deferred, in_slices
from sidecar.model import QueueKey


# identity: a parked request is a key of its queue's group; slots: a wake-up reads a
# few fields of each of 10,000, on two threads
@dataclass(eq=False, slots=True)
class Parked:
    """One waiting request."""

    key: QueueKey
    cycle: RequestResponseCycle
    fd: int | None  # its connection's socket, to be written around its transport
    producer: Declared
    asked_at: float
    woken: asyncio.Future[None]
    answered: bool = False  # its answer was written (or its client left)
    rest: bytes = b""  # of its answer, what its socket did not take at once
    left: bool = False  # it stopped waiting before the wake-up reached it
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class ParkedPolls:
    """The parked requests per queue; see the module docstring."""

    def __init__(self, answers: Answers, switch: DirectSwitch) -> None:
        self.answers = answers
        self.switch = switch
        self._parked: dict[QueueKey, dict[Parked, None]] = {}  # insertion-ordered sets
        self._wakes: set[asyncio.Task[None]] = set()
        self._ended: list[Parked] = []  # waits ended, for the task that answers them
        self.last_wakeup: WakeUp | None = None  # of a queue's parked requests, by a change
        self.last_ended: WakeUp | None = None  # of requests whose waits ended together

    @property
    def waiting(self) -> int:
        """Requests parked now."""
        return sum(len(group) for group in self._parked.values())

    async def wait(self, key: QueueKey, link: Link, cycle: RequestResponseCycle,
                   producer: Declared, asked_at: float, seconds: float) -> bool:
        """Park until the queue's version changes, `seconds` pass or a graceful stop
        begins; True when it was answered then (or its client left), False when the
        caller must answer."""
        loop = asyncio.get_running_loop()
        if not cycle.keep_alive:  # unread, its client's close costs a wake-up nothing
            cycle.flow.pause_reading()
        parked = Parked(key, cycle, socket_fd(cycle.transport), producer, asked_at,
                        loop.create_future())
        parked.timer = loop.call_later(seconds, self._wait_ended, parked)
        self._parked.setdefault(key, {})[parked] = None
        link.on_end = lambda: self._wait_ended(parked)
        try:
            await parked.woken
        finally:
            link.on_end = None
            parked.timer.cancel()
            if parked.answered:
                finish(cycle)  # cancelled between its answer's write and that response's end
            else:
                parked.left = True
                self._unpark(parked)
        return parked.answered

    def on_version(self, key: QueueKey) -> None:
        """Engine version watcher: answer every request parked on the queue."""
        group = self._parked.pop(key, None)
        if group:
            self._start(self._answer(list(group), {key}, time.perf_counter(), ended=False))

    def _wait_ended(self, parked: Parked) -> None:
        """Timer: the request's wait ended without a change; it is answered with the others
        whose waits end now (unless a wake-up has it already)."""
        if not self._unpark(parked):
            return  # taken by a wake-up
        self._ended.append(parked)
        if len(self._ended) == 1:  # the first since the task before took its batch
            self._start(self._answer_ended(time.perf_counter()))

    def _unpark(self, parked: Parked) -> bool:
        """Take the request out of its queue's group (the last one takes the group); False
        when a wake-up has taken it already."""
        group = self._parked.get(parked.key)
        if group is None or parked not in group:
            return False
        del group[parked]
        if not group:
            del self._parked[parked.key]
        return True

    def _start(self, answering: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(answering)
        self._wakes.add(task)
        task.add_done_callback(self._wakes.discard)

    async def _answer_ended(self, since: float) -> None:
        await asyncio.sleep(0)  # the timers due in this turn of the loop join the batch
        ended, self._ended = self._ended, []
        await self._answer(ended, {one.key for one in ended}, since, ended=True)

    async def _answer(self, parked: list[Parked], keys: set[QueueKey], since: float, *,
                      ended: bool) -> None:
        """Write every request its queue's answer of now (`keys`: their queues), encoded
        once a queue on the event loop's thread (the answers' cache is not for two
        threads) before the writes are shared out (`api.edge.paired_writes`), and note what the
        writes took since `since` (`last_ended` for waits that `ended`, else
        `last_wakeup`) unless every queue was gone (each request then answers itself: a
        404 that says why); then end the responses, note the producers, wake the
        requests. `parked` is never empty: a wake-up and a batch of ended waits each begin
        with one request."""
        engine = self.answers.engine
        entries: dict[QueueKey, QueueEntry | None] = {}
        encoded: dict[QueueKey, tuple[bytes, bytes]] = {}
        default_headers = parked[0].cycle.default_headers  # uvicorn's date and server
        for key in keys:
            entry = entries[key] = engine.entry(key)
            if entry is not None:
                encoded[key] = whole_answers(default_headers, FLOW_HEADERS,
                                             self.answers.flow_body(entry))
        # producers of a paced queue (their suggestedRate) or a stopped class (its answer)
        personal = self._personal(parked, entries, default_headers)

        attempt = attempt_of(personal, encoded)

        def write(one: Parked) -> None:  # what its socket did not take
            rest, one.rest = one.rest, b""
            one.cycle.transport.write(rest)

        cpu = time.process_time()
        took = None  # to the last write: settling the woken requests takes longer at 10,000
        try:
            with collections_deferred():
                await in_slices(each_written(parked, write,
                                             lambda step: shared(step, attempt)),
                                WAKE_SLICE_SECONDS)
            took = WakeUp(len(parked), time.perf_counter() - since, time.process_time() - cpu)
        # any failure: each request not answered yet answers through send
        except Exception as exc:  # noqa: BLE001
            self.switch.failed(exc)
            encoded.clear()
        finally:
            await self._settle(parked, entries)
        if encoded and took is not None:
            if ended:
                self.last_ended = took
            else:
                self.last_wakeup = took

    def _personal(self, parked: list[Parked], entries: dict[QueueKey, QueueEntry | None],
                  default_headers: Headers) -> dict[Parked, tuple[bytes, bytes]]:
        """The answers of producers of paced queues, each with its own `suggestedRate`
        (`Answers.producer_body`), and of producers of a stopped class, their class's
        (encoded once a class); encoded here on the event loop's thread. Only the requests
        of paced queues or queues holding a stopped class are visited."""
        special = {key for key, entry in entries.items() if entry is not None and (
            entry.pacing.engaged or entry.classes_held)}
        found: dict[Parked, tuple[bytes, bytes]] = {}
        if not special:
            return found
        now = time.time()
        made: dict[bytes, tuple[bytes, bytes]] = {}  # equal bodies (all offered 0 at a
        # stop, a class's answer) are framed once

        def whole(body: bytes) -> tuple[bytes, bytes]:
            framed = made.get(body)
            if framed is None:
                framed = made[body] = whole_answers(default_headers, FLOW_HEADERS, body)
            return framed

        for one in parked:
            entry = entries[one.key] if one.key in special else None
            if entry is None:
                continue
            producer_id, name = one.producer[0], one.producer[3]
            if entry.pacing.engaged and producer_id is not None:
                found[one] = whole(self.answers.producer_body(entry, producer_id, now, name))
            elif name is not None and self.answers.class_stopped(entry, name):
                found[one] = whole(self.answers.flow_body(entry, name))
        return found

    async def _settle(self, parked: list[Parked],
                      entries: dict[QueueKey, QueueEntry | None]) -> None:
        """End the responses written, note their producers and wake every request, each
        whatever happened to the others (a request not answered then answers itself)."""
        now = time.time()

        def settle(one: Parked) -> None:
            try:
                if one.answered:
                    if one.rest:  # cut short by a failure: only a close ends it now
                        one.cycle.transport.close()
                    finish(one.cycle)
                producer_id, capacity, capacity_bytes, producer_class, _ = one.producer
                entry = entries[one.key]
                if one.answered and producer_id is not None and entry is not None:
                    self.answers.record_producer(entry, producer_id, capacity, now,
                                                 capacity_bytes=capacity_bytes,
                                                 asked_at=one.asked_at,
                                                 producer_class=producer_class)
            except Exception as exc:  # noqa: BLE001 (whatever it is, the others are settled)
                self.switch.failed(exc)
            if not one.woken.done():
                one.woken.set_result(None)

        try:
            await in_slices(each_written(parked, settle), WAKE_SLICE_SECONDS)
        finally:
            for one in parked:
                if not one.woken.done():
                    one.woken.set_result(None)


def attempt_of(personal: Mapping[Parked, tuple[bytes, bytes]],
               encoded: Mapping[QueueKey, tuple[bytes, bytes]]) -> Callable[[Parked], bool]:
    """A wake-up's attempt at one request: its answer (its own, else its queue's) begun on
    its cycle and written to its socket as far as the socket takes it; True when nothing
    is left for the event loop. Run on either thread (`api.edge.paired_writes`);
    bench/wake_write_cost.py times this very function."""

    def attempt(one: Parked) -> bool:
        answer = personal.get(one) or encoded.get(one.key)
        if answer is None or one.left:
            return True
        data = begin_whole(one.cycle, answer)
        one.answered = data is not None
        if data:
            one.rest = data[write_around(one.cycle.transport, one.fd, data):]
        return not one.rest

    return attempt
