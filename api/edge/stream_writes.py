"""SSE events written straight to the connections of streams that have caught up.

A stream's coroutine hands its connection's writer here once it has sent what it had
queued (`claim`); the hub then passes each change's claimed streams to `publish` instead of
queueing the change for each. One task writes each event, encoded once, to every such
stream in steps (`api.edge.wake_steps`), each step first tried on two threads
(`api.edge.paired_writes`): 10,000 coroutine steps and ASGI sends made the last of 10,000
streams wait seconds. A stream that cannot take an event (its client left, or reads too
slowly) is ended; its client reconnects with Last-Event-ID. If the direct path raises, the
events not yet written go to the streams' queues, their coroutines send them through ASGI
`send`, and the switch turns the direct path off (`DirectSwitch`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from api.edge.direct_writes import ChunkWriter, DirectSwitch
from api.edge.paired_writes import shared
from api.edge.wake_steps import WAKE_SLICE_SECONDS, WakeUp, each_written
from sidecar.flow.slices import collections_deferred, in_slices
from sidecar.signals.change_fanout import ChangeHub, Event, Stream


class StreamWrites:
    """The claimed streams' writers and the task writing to them; see the module
    docstring."""

    def __init__(self, hub: ChangeHub, switch: DirectSwitch) -> None:
        self.hub, self.switch = hub, switch
        self._writers: dict[Stream, ChunkWriter] = {}
        self._sent: dict[Stream, int] = {}  # the last event written to each
        # events to write, oldest first: (seq, change, streams, when)
        self._pending: deque[tuple[int, Event, list[Stream], float]] = deque()
        self._task: asyncio.Task[None] | None = None
        self.last_wakeup: WakeUp | None = None
        hub.on_claimed = self.publish

    def claim(self, stream: Stream, writer: ChunkWriter) -> None:
        """From now on the stream's events are written here, not queued."""
        self._writers[stream] = writer
        stream.claimed = True

    def release(self, stream: Stream) -> None:
        stream.claimed = False
        self._writers.pop(stream, None)
        self._sent.pop(stream, None)

    def publish(self, seq: int, change: Event, streams: list[Stream]) -> None:
        """Hub's `on_claimed`: write the change to its claimed streams, in order."""
        self._pending.append((seq, change, streams, time.perf_counter()))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        writers, sent = self._writers, self._sent

        def write(stream: Stream) -> None:  # on the event loop's thread
            writer = writers.get(stream)
            if stream.overflowed or writer is None or sent.get(stream, 0) >= seq:
                return
            if writer(frame):
                sent[stream] = seq
                return
            ChangeHub.overflow(stream)
            with contextlib.suppress(asyncio.QueueFull):
                stream.queue.put_nowait(None)

        def attempt(stream: Stream) -> bool:  # on either thread: reads, and a socket write
            writer = writers.get(stream)
            if stream.overflowed or writer is None:
                return True
            if writer.around_loop(frame):
                sent[stream] = seq
                return True
            return False

        try:
            while self._pending:
                seq, change, streams, since = self._pending[0]
                frame = self.hub.frame(seq, change)
                cpu = time.process_time()
                with collections_deferred():
                    await in_slices(each_written(streams, write,
                                                 lambda step: shared(step, attempt)),
                                    WAKE_SLICE_SECONDS)
                self._pending.popleft()
                self.last_wakeup = WakeUp(len(streams), time.perf_counter() - since,
                                          time.process_time() - cpu)
        # any failure: each stream gets its events through its queue, and send
        except Exception as exc:  # noqa: BLE001
            self._queue_pending()
            self.switch.failed(exc)
        finally:
            self._task = None

    def _queue_pending(self) -> None:
        """Hand the events not yet written to their streams' queues, and stop writing to
        those streams."""
        while self._pending:
            seq, change, streams, _ = self._pending.popleft()
            for stream in streams:
                done = self._sent.get(stream, 0) >= seq
                self.release(stream)
                if not stream.overflowed and not done:
                    self.hub.deliver(stream, seq, change)
