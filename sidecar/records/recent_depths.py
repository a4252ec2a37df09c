"""The last few depth samples of every queue, in memory, for the dashboard's sparklines.

Bounded both ways: at most `size` samples per queue (a ring buffer) and only the queues the
last poll reported, so memory follows the broker's queue count, never the uptime. Nothing
is persisted: the durable record is `sidecar.records.history`; this is what a browser opening the
dashboard should see at once, without reading files.
"""

from __future__ import annotations

from collections import deque
from itertools import takewhile

from sidecar.flow.slices import SLICE, Steps, drain
from sidecar.model import QueueInfo, QueueKey

Sample = tuple[float, int, int]  # (poll time, messages, bytes)


class RecentDepths:
    """Per-queue ring buffers of (time, messages, bytes), fed by `Poller.on_snapshot`."""

    def __init__(self, size: int = 120) -> None:
        self.size = size
        self._series: dict[QueueKey, deque[Sample]] = {}

    def on_snapshot(self, infos: list[QueueInfo], now: float) -> None:
        """Poll hook: append every reported depth; forget queues no longer reported."""
        drain(self.on_snapshot_in_slices(infos, now))

    def on_snapshot_in_slices(self, infos: list[QueueInfo], now: float) -> Steps[None]:
        """`on_snapshot`, yielding every SLICE queues (`sidecar.flow.slices`).

        A queue without statistics yet keeps its buffer but gains no sample, as the engine
        keeps its last depth; a poll without byte figures (a Prometheus poll between two
        byte reads) repeats the last bytes, as the engine shows them.
        """
        series: dict[QueueKey, deque[Sample]] = {}
        for count, info in enumerate(infos, 1):
            key = (info.vhost, info.name)
            ring = self._series.get(key)
            if ring is None:
                ring = deque(maxlen=self.size)
            if info.messages is not None:
                nbytes = info.bytes if info.bytes is not None else (ring[-1][2] if ring else 0)
                ring.append((now, info.messages, nbytes))
            series[key] = ring
            if count % SLICE == 0:
                yield
        self._series = series

    def holds(self, key: QueueKey) -> bool:
        """Whether the queue has a buffer (the last poll reported it)."""
        return key in self._series

    def since(self, key: QueueKey, after: float | None = None) -> list[Sample]:
        """The queue's samples newer than `after` (all when None), oldest first; reading
        from the newest end, so a client asking for what is new costs only what is new."""
        ring = self._series.get(key, ())
        if after is None:
            return list(ring)
        newer = list(takewhile(lambda sample: sample[0] > after, reversed(ring)))
        newer.reverse()
        return newer
