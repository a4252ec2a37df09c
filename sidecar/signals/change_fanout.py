"""Fan-out of flow changes to long-poll waiters and Server-Sent-Event streams.

Producers that wait for a change should cost a coroutine, not a thread: every waiter on a
queue awaits one shared future, which a change resolves, so a transition wakes all of them
in one step however many there are. Streams get their own bounded queue; a stream that
falls too far behind is closed (its client reconnects with Last-Event-ID) rather than
letting memory grow. A ring of recent changes lets a reconnecting stream replay what it
missed. Each change is encoded as an SSE event once (`frame`), and those same bytes go to
every stream. A stream that has caught up and can be written to directly (`Stream.direct`)
is not woken at all: one task writes each event to every such stream in a loop, giving
the event loop a turn every `WAKE_SLICE_SECONDS` (10,000 coroutine steps and ASGI sends
made the last of 10,000 streams wait seconds); where the server allows
(`ChangeHub.shared`), each step's writes are first tried on two threads at once. Streams
are kept by their filter, equal filters one key, and filters that name their queues by
those names: a change asks each filter that could want it once, not every stream. Runs on
the event loop; `on_change` is an engine listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Protocol, TypeVar

from sidecar.flow.slices import Steps, collections_deferred, in_slices
from sidecar.model import Change, QueueKey
from sidecar.signals.event_json import change_json, sse_frame

Matcher = Callable[[QueueKey], bool]
#: runs an attempt for every item of a step, perhaps on two threads at once
#: (`api.edge.paired_writes.shared`); the items an attempt did not finish
Shared = Callable[[Sequence["Stream"], Callable[["Stream"], bool]], list["Stream"]]
View = TypeVar("View")
T = TypeVar("T")
#: what a long poll reads: (the answer, its version, the queues whose changes it waits for)
Reader = Callable[[], Awaitable[tuple[View, int, list[QueueKey]]]]
FRAMES_KEPT = 1024  # encoded events kept for streams that have not sent them yet
WAKE_SLICE_SECONDS = 0.002  # the longest a wake-up's writes hold the event loop at a time
# connections written between two looks at the clock; a step is also one handover to the
# thread that writes beside the event loop's (docs/benchmarks.md, "Long-poll wake-up")
WRITES_PER_STEP = 128


@dataclass(frozen=True)
class WakeUp:
    """The last wake-up of one kind: how many connections it wrote to, the seconds from
    the change to the last write handed to a transport, and the process's CPU seconds
    over the writes (far fewer than `seconds`: the process waited for a core)."""

    connections: int
    seconds: float
    cpu_seconds: float


def each_written(items: Sequence[T], write: Callable[[T], object],
                 first: Callable[[Sequence[T]], Sequence[T]] | None = None) -> Steps[None]:
    """`write(item)` for every item, as steps for `in_slices`. With `first`, a step is
    first handed to it (a wake-up's shares its writes out to two threads:
    `api.edge.paired_writes`), and only the items it returns are written."""
    for start in range(0, len(items), WRITES_PER_STEP):
        step = items[start:start + WRITES_PER_STEP]
        for item in step if first is None else first(step):
            write(item)
        yield


class DirectWriter(Protocol):
    """Writes events straight to a stream's client (`api.edge.direct_writes.ChunkWriter`)."""

    def __call__(self, event: bytes) -> bool:
        """Write the event, on the event loop's thread; False when it cannot (the client
        left, or reads too slowly): the stream then ends."""

    def around_loop(self, event: bytes) -> bool:
        """Try to write the event from either thread of a step (`Shared`); True when it
        is written, False when the event loop's thread must call the writer."""


# identity semantics: streams live in a set; slots: a wake-up reads two fields of each
@dataclass(eq=False, slots=True)
class Stream:
    """One SSE subscriber: which queues it wants and what it has not sent yet."""

    matches: Matcher
    # None: wake up and look (the client left)
    queue: asyncio.Queue[tuple[int, Change] | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=10_000))
    overflowed: bool = False
    #: writes events straight to the client, set once the stream has caught up
    direct: DirectWriter | None = None
    sent: int = 0  # the last event written to it directly


class ChangeHub:
    """Wakes waiters and feeds streams; see the module docstring."""

    def __init__(self, replay: int = 10_000) -> None:
        self.boot = uuid.uuid4().hex[:8]  # event ids from another run cannot be replayed
        self.seq = 0
        # one shared future per queue with waiters, and how many requests await it
        self._waiters: dict[QueueKey, tuple[asyncio.Future[None], int]] = {}
        # the streams by matcher, equal matchers one key; the matchers that name their
        # queues by those names, and the others: a change asks only its queue's matchers
        # and the others, each once however many streams share it (10,000 streams asked
        # one by one took 2-7 ms of the event loop a change of any queue, 8 ms with a glob)
        self._streams: dict[Matcher, set[Stream]] = {}
        self._names: dict[Matcher, frozenset[str]] = {}  # of the matchers that name them
        self._named: dict[str, set[Matcher]] = {}
        self._unnamed: set[Matcher] = set()
        self._recent: deque[tuple[int, Change]] = deque(maxlen=replay)
        self._frames: dict[int, bytes] = {}  # seq -> its SSE event, oldest first
        # events to write to direct streams, oldest first: (seq, change, streams, when)
        self._direct: deque[tuple[int, Change, list[Stream], float]] = deque()
        self._writer: asyncio.Task[None] | None = None
        self.last_stream_wakeup: WakeUp | None = None
        #: told when a direct writer raised (its streams then get their events queued)
        self.on_direct_failure: Callable[[BaseException], None] | None = None
        #: where a step's events are first tried (`DirectWriter.around_loop`); None: each
        #: is written by the event loop's thread (a server that cannot write around)
        self.shared: Shared | None = None

    def on_version(self, key: QueueKey) -> None:
        """Engine version watcher: wake every long-poll waiter on the queue at once."""
        waiter, _ = self._waiters.pop(key, (None, 0))
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_change(self, change: Change) -> None:
        """Engine listener: record the transition and feed matching streams."""
        key = (change.vhost, change.queue)
        self.seq += 1
        self._recent.append((self.seq, change))
        direct: list[Stream] = []
        named = self._named.get(change.queue)
        for matches in chain(self._unnamed, named) if named else self._unnamed:
            if not matches(key):
                continue
            for stream in self._streams[matches]:
                if stream.overflowed:
                    continue
                if stream.direct is not None:
                    direct.append(stream)
                    continue
                try:
                    stream.queue.put_nowait((self.seq, change))
                except asyncio.QueueFull:
                    stream.overflowed = True
        if direct:
            self._direct.append((self.seq, change, direct, time.perf_counter()))
            if self._writer is None:
                self._writer = asyncio.get_running_loop().create_task(self._write_direct())

    async def _write_direct(self) -> None:
        """Write each pending event to its direct streams, in order; a stream that cannot
        take it is ended (woken with None), and its client reconnects with Last-Event-ID."""

        def write(stream: Stream) -> None:
            if stream.overflowed or stream.direct is None or stream.sent >= seq:
                return
            if stream.direct(frame):
                stream.sent = seq
                return
            stream.overflowed = True
            with contextlib.suppress(asyncio.QueueFull):
                stream.queue.put_nowait(None)

        def attempt(stream: Stream) -> bool:  # on either thread: reads, and a socket write
            direct = stream.direct
            if stream.overflowed or direct is None:
                return True
            if direct.around_loop(frame):
                stream.sent = seq
                return True
            return False

        shared = self.shared
        first = None if shared is None else lambda step: shared(step, attempt)
        seq = 0
        try:
            while self._direct:
                seq, change, streams, since = self._direct[0]
                frame = self.frame(seq, change)
                cpu = time.process_time()
                with collections_deferred():
                    await in_slices(each_written(streams, write, first), WAKE_SLICE_SECONDS)
                self._direct.popleft()
                self.last_stream_wakeup = WakeUp(len(streams), time.perf_counter() - since,
                                                 time.process_time() - cpu)
        except Exception as exc:  # noqa: BLE001 (any: each stream gets its events queued)
            self._queue_direct()
            if self.on_direct_failure is not None:
                self.on_direct_failure(exc)
        finally:
            self._writer = None

    def _queue_direct(self) -> None:
        """Hand the events not yet written directly to their streams' queues, and stop
        writing to those streams directly."""
        while self._direct:
            seq, change, streams, _ = self._direct.popleft()
            for stream in streams:
                stream.direct = None
                if stream.overflowed or stream.sent >= seq:
                    continue
                try:
                    stream.queue.put_nowait((seq, change))
                except asyncio.QueueFull:
                    stream.overflowed = True

    def _join(self, key: QueueKey) -> asyncio.Future[None]:
        waiter, count = self._waiters.get(key, (None, 0))
        if waiter is None or waiter.done():
            waiter, count = asyncio.get_running_loop().create_future(), 0
        self._waiters[key] = (waiter, count + 1)
        return waiter

    def _leave(self, key: QueueKey, waiter: asyncio.Future[None]) -> None:
        """The last request to stop waiting on a queue takes its future away, so waits
        that time out on queues that never change leave nothing behind."""
        current, count = self._waiters.get(key, (None, 0))
        if current is not waiter:
            return  # already resolved and replaced
        if count > 1:
            self._waiters[key] = (waiter, count - 1)
        else:
            del self._waiters[key]

    async def wait(self, keys: list[QueueKey], timeout: float,
                   until: asyncio.Future[None] | None = None) -> bool:
        """Until any of the queues' answers changes or `until` is done (True), or
        `timeout` passes (False)."""
        joined = {key: self._join(key) for key in set(keys)}
        waited = set(joined.values()) | ({until} if until is not None else set())
        if not waited:
            await asyncio.sleep(timeout)
            return False
        try:
            # asyncio.wait neither cancels the shared futures nor leaves callbacks on them
            done, _ = await asyncio.wait(waited, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            for key, waiter in joined.items():
                self._leave(key, waiter)
        return bool(done)

    async def long_poll(self, read: Reader[View], since: int | None, wait: float | None,
                        recheck: float = math.inf,
                        until: asyncio.Future[None] | None = None) -> View:
        """`read()`'s answer once its version differs from `since` (or from the first
        read's, without `since`), `wait` seconds end (None, 0: at once) or `until` is done
        (a graceful stop). Reads again on any change of the queues it named, and at least
        every `recheck` seconds for what no queue change signals (an exchange's new
        bindings)."""
        view, version, keys = await read()
        if not wait:
            return view
        since = version if since is None else since
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while version == since and (left := deadline - loop.time()) > 0 and not (
                until is not None and until.done()):
            await self.wait(keys, min(left, recheck), until)
            view, version, keys = await read()
        return view

    @property
    def waited_on(self) -> int:
        """Queues that long-poll requests are waiting on now (bounded by the requests)."""
        return len(self._waiters)

    def event_id(self, seq: int) -> str:
        return f"{self.boot}-{seq}"

    def frame(self, seq: int, change: Change) -> bytes:
        """The change as one SSE `flow` event, encoded once however many streams send it
        (a stream far behind, or a replay, may encode it again)."""
        frame = self._frames.get(seq)
        if frame is None:
            frame = self._frames[seq] = sse_frame("flow", self.event_id(seq),
                                                  change_json(change))
            if len(self._frames) > FRAMES_KEPT:
                del self._frames[next(iter(self._frames))]
        return frame

    def missed(self, last_event_id: str | None,
               matches: Matcher) -> list[tuple[int, Change]] | None:
        """Changes after `last_event_id` that a reconnecting stream missed; None when they
        cannot be replayed (another run, or older than the ring), so the caller must send
        a fresh snapshot instead."""
        if not last_event_id:
            return None
        boot, _, seq_text = last_event_id.partition("-")
        if boot != self.boot or not seq_text.isdigit():
            return None
        seq = int(seq_text)
        if seq > self.seq or (self._recent and seq < self._recent[0][0] - 1):
            return None
        # the ring is numbered without gaps: only the changes after `seq` are asked about
        # (10,000 streams reconnecting each asked about the whole ring, 10,000 changes)
        first = self._recent[0][0] if self._recent else seq + 1
        return [(s, c) for s, c in islice(self._recent, max(0, seq + 1 - first), None)
                if matches((c.vhost, c.queue))]

    def subscribe(self, matches: Matcher, names: frozenset[str] = frozenset()) -> Stream:
        """A stream of the changes `matches` wants (hashable: equal matchers are asked
        once a change). `names`, when not empty, are the only queue names `matches` lets
        through: it is asked only about changes of those."""
        stream = Stream(matches)
        streams = self._streams.get(matches)
        if streams is None:
            streams = self._streams[matches] = set()
            if names:
                self._names[matches] = names
                for name in names:
                    self._named.setdefault(name, set()).add(matches)
            else:
                self._unnamed.add(matches)
        streams.add(stream)
        return stream

    def unsubscribe(self, stream: Stream) -> None:
        matches = stream.matches
        streams = self._streams.get(matches)
        if streams is None:
            return
        streams.discard(stream)
        if streams:
            return
        del self._streams[matches]
        self._unnamed.discard(matches)
        for name in self._names.pop(matches, ()):
            named = self._named[name]
            named.discard(matches)
            if not named:
                del self._named[name]
