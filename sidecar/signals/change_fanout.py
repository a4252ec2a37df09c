"""Fan-out of flow changes to long-poll waiters and Server-Sent-Event streams: plain
publish/subscribe on the event loop.

Producers that wait for a change should cost a coroutine, not a thread: every waiter on a
queue awaits one shared future, which a change resolves, so a transition wakes all of them
in one step however many there are. Streams get their own bounded queue; a stream that
falls too far behind is closed (its client reconnects with Last-Event-ID) rather than
letting memory grow. A ring of recent changes lets a reconnecting stream replay what it
missed. Each change is encoded as an SSE event once (`frame`), and those same bytes go to
every stream. A stream that a subscriber of the hub's has `claimed` (the API's edge, which
writes events to caught-up streams itself) is handed to it (`on_claimed`) instead of its
queue. Streams are kept by their filter, equal filters one key, and filters that name
their queues by those names: a change asks each filter that could want it once, not every
stream. `on_change` is an engine listener.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TypeVar

from sidecar.flow.forecast import WarningNote
from sidecar.model import Change, QueueKey
from sidecar.signals.event_json import change_json, sse_frame, warning_json, warning_type

Matcher = Callable[[QueueKey], bool]
#: what streams are sent: a flow change, or a warning episode's start or end (only to the
#: streams that asked for warnings)
Event = Change | WarningNote
View = TypeVar("View")
#: what a long poll reads: (the answer, its version, the queues whose changes it waits for)
Reader = Callable[[], Awaitable[tuple[View, int, list[QueueKey]]]]
#: takes a change's claimed streams: (its sequence number, the change, the streams)
Claimed = Callable[[int, Event, list["Stream"]], None]
FRAMES_KEPT = 1024  # encoded events kept for streams that have not sent them yet


# identity semantics: streams live in a set; slots: a wake-up reads two fields of each
@dataclass(eq=False, slots=True)
class Stream:
    """One SSE subscriber: which queues it wants and what it has not sent yet."""

    matches: Matcher
    # None: wake up and look (the client left)
    queue: asyncio.Queue[tuple[int, Event] | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=10_000))
    overflowed: bool = False
    claimed: bool = False  # its events go to the hub's `on_claimed`, not its queue
    # called once when it overflows: its reader may be stuck where the queue cannot wake it
    on_overflow: Callable[[], None] | None = None


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
        self._warned: set[Matcher] = set()  # the matchers whose streams want warnings
        self._recent: deque[tuple[int, Event]] = deque(maxlen=replay)
        self._frames: dict[int, bytes] = {}  # seq -> its SSE event, oldest first
        self.on_claimed: Claimed | None = None  # who takes the claimed streams' events

    def on_version(self, key: QueueKey) -> None:
        """Engine version watcher: wake every long-poll waiter on the queue at once."""
        waiter, _ = self._waiters.pop(key, (None, 0))
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_change(self, change: Change) -> None:
        """Engine listener: record the transition and feed matching streams."""
        self._publish((change.vhost, change.queue), change)

    def on_warning(self, note: WarningNote) -> None:
        """Engine warning listener: record the episode's start or end and feed the matching
        streams that asked for warnings (numbered in the same sequence as changes)."""
        self._publish(note.key, note)

    def _publish(self, key: QueueKey, change: Event) -> None:
        self.seq += 1
        self._recent.append((self.seq, change))
        claimed: list[Stream] = []
        named = self._named.get(key[1])
        warning = isinstance(change, WarningNote)
        for matches in chain(self._unnamed, named) if named else self._unnamed:
            if (warning and matches not in self._warned) or not matches(key):
                continue
            for stream in self._streams[matches]:
                if stream.overflowed:
                    continue
                if stream.claimed:
                    claimed.append(stream)
                else:
                    self.deliver(stream, self.seq, change)
        if claimed and self.on_claimed is not None:
            self.on_claimed(self.seq, change, claimed)

    @staticmethod
    def deliver(stream: Stream, seq: int, change: Event) -> None:
        """Queue the change for the stream; one that cannot take it any more ends (its
        client reconnects with Last-Event-ID)."""
        try:
            stream.queue.put_nowait((seq, change))
        except asyncio.QueueFull:
            ChangeHub.overflow(stream)

    @staticmethod
    def overflow(stream: Stream) -> None:
        """The stream takes no more events: it ends once it has sent what it has queued,
        and its `on_overflow` is told."""
        if stream.overflowed:
            return
        stream.overflowed = True
        if stream.on_overflow is not None:
            stream.on_overflow()

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

    def frame(self, seq: int, change: Event) -> bytes:
        """The change as one SSE `flow` event (a warning as `flow.warning` or
        `flow.warning-cleared`), encoded once however many streams send it (a stream far
        behind, or a replay, may encode it again)."""
        frame = self._frames.get(seq)
        if frame is None:
            frame = self._frames[seq] = (
                sse_frame(warning_type(change), self.event_id(seq), warning_json(change))
                if isinstance(change, WarningNote)
                else sse_frame("flow", self.event_id(seq), change_json(change)))
            if len(self._frames) > FRAMES_KEPT:
                del self._frames[next(iter(self._frames))]
        return frame

    def missed(self, last_event_id: str | None,
               matches: Matcher) -> list[tuple[int, Event]] | None:
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
        warned = matches in self._warned
        return [(s, c) for s, c in islice(self._recent, max(0, seq + 1 - first), None)
                if (matches(c.key) if isinstance(c, WarningNote) and warned
                    else not isinstance(c, WarningNote) and matches((c.vhost, c.queue)))]

    def subscribe(self, matches: Matcher, names: frozenset[str] = frozenset(),
                  warnings: bool = False) -> Stream:
        """A stream of the changes `matches` wants (hashable: equal matchers are asked
        once a change). `names`, when not empty, are the only queue names `matches` lets
        through: it is asked only about changes of those. With `warnings`, warning
        episodes too (the matcher must then differ from those of streams without)."""
        stream = Stream(matches)
        streams = self._streams.get(matches)
        if streams is None:
            streams = self._streams[matches] = set()
            if warnings:
                self._warned.add(matches)
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
        self._warned.discard(matches)
        for name in self._names.pop(matches, ()):
            named = self._named[name]
            named.discard(matches)
            if not named:
                del self._named[name]
