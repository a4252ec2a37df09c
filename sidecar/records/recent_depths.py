"""The last few depth samples of every queue, in memory, for the dashboard's sparklines.

Bounded both ways: at most `size` samples per queue (a ring buffer) and only the queues the
last poll reported, so memory follows the broker's queue count, never the uptime. Nothing
is persisted: the durable record is `sidecar.records.history`; this is what a browser opening the
dashboard should see at once, without reading files.

A ring is one flat `array('d')` of (time, messages, bytes) triples, not a deque of tuples,
which took three times the memory and a million objects for the garbage collector at
10,000 queues (docs/benchmarks.md#reads-and-memory-at-10000-queues). Counts are stored as
floats, exact up to 2**53, and read back as ints.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import takewhile

from sidecar.flow.slices import SLICE, Steps, drain
from sidecar.model import QueueInfo, QueueKey

Sample = tuple[float, int, int]  # (poll time, messages, bytes)


class DepthRing:
    """At most `size` samples, oldest overwritten first; grows until full."""

    __slots__ = ("_data", "_next", "bytes", "fed", "key", "size")

    def __init__(self, size: int, key: QueueKey) -> None:
        # the queue's key, kept for the table's next poll: a new tuple per queue and poll
        # is one more object a poll for the garbage collector to walk
        self.key = key
        self.size = size
        self._data = array("d")  # (time, messages, bytes) per sample
        # the oldest sample's index, overwritten next (0 until full: then the oldest is first)
        self._next = 0
        self.bytes = 0  # the newest sample's bytes, for a sample without them
        self.fed = 0  # the last poll that listed the queue (`RecentDepths`)

    def __len__(self) -> int:
        return len(self._data) // 3

    def append(self, at: float, messages: int, nbytes: int | None) -> None:
        """A sample; without bytes (None), the newest sample's bytes again."""
        if nbytes is None:
            nbytes = self.bytes
        else:
            self.bytes = nbytes
        data = self._data
        if len(data) < 3 * self.size:
            data.extend((at, messages, nbytes))
            return
        i = 3 * self._next  # three stores: half the cost of a slice from a new array
        data[i], data[i + 1], data[i + 2] = at, messages, nbytes
        self._next = (self._next + 1) % self.size

    def newest_first(self) -> Iterator[Sample]:
        """The samples, newest first, one at a time: a reader that stops early (what is
        new since a time) builds only what it reads."""
        data, count = self._data, len(self)
        for k in range(count - 1, -1, -1):
            j = 3 * ((self._next + k) % count)
            yield data[j], int(data[j + 1]), int(data[j + 2])


class RecentDepths:
    """Per-queue ring buffers of (time, messages, bytes), fed by `Poller.on_snapshot`."""

    def __init__(self, size: int = 120) -> None:
        self.size = size
        self._series: dict[QueueKey, DepthRing] = {}
        self._polls = 0  # polls fed so far: each ring is stamped with the last to list it

    def on_snapshot(self, infos: list[QueueInfo], now: float) -> None:
        """Poll hook: append every reported depth; forget queues no longer reported."""
        drain(self.on_snapshot_in_slices(infos, now))

    def on_snapshot_in_slices(self, infos: list[QueueInfo], now: float) -> Steps[None]:
        """`on_snapshot`, yielding every SLICE queues (`sidecar.flow.slices`).

        A queue without statistics yet keeps its buffer but gains no sample, as the engine
        keeps its last depth; a poll without byte figures (a Prometheus poll between two
        byte reads) repeats the last bytes, as the engine shows them.
        """
        polls = self._polls = self._polls + 1
        series = self._series  # kept: a new table of every queue per poll cost 1-2 ms
        listed = 0  # queues of this poll, each once
        for count, info in enumerate(infos, 1):
            key = (info.vhost, info.name)
            ring = series.get(key)
            if ring is None:
                ring = series[key] = DepthRing(self.size, key)
            if ring.fed != polls:
                ring.fed = polls
                listed += 1
            if info.messages is not None:
                ring.append(now, info.messages, info.bytes)
            if count % SLICE == 0:
                yield
        if listed != len(series):  # some queues were not listed: they are gone
            for ring in [r for r in series.values() if r.fed != polls]:
                del series[ring.key]

    def holds(self, key: QueueKey) -> bool:
        """Whether the queue has a buffer (the last poll reported it)."""
        return key in self._series

    def since(self, key: QueueKey, after: float | None = None) -> list[Sample]:
        """The queue's samples newer than `after` (all when None), oldest first; reading
        from the newest end, so a client asking for what is new costs only what is new."""
        ring = self._series.get(key)
        if ring is None:
            return []
        newest = ring.newest_first()
        newer = list(newest if after is None else
                     takewhile(lambda sample: sample[0] > after, newest))
        newer.reverse()
        return newer
