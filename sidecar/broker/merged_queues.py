"""A Prometheus-mode poll's queues: the listing with this poll's figures and consumers,
rebuilt only for the queues where one of them changed.

The listing (arguments, policy, rates) is read every 30 s or more, the figures every poll
(`prometheus_text.FigureLines` keeps a queue's `QueueFigures` object while its lines stay
the same) and the consumers' windows every poll. At 10,000 queues, building a new
`QueueInfo` for every queue twice a poll (figures, then consumers) took 0.2-0.4 s of the
poll's worker thread; a queue whose listed info, figures and window are those of the poll
before keeps the `QueueInfo` it had, and the engine skips such a queue's re-resolution by
identity (`FlowEngine.apply_poll`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from sidecar.broker.prometheus_text import QueueFigures
from sidecar.model import QueueInfo, QueueKey

Window = tuple[int, int | None]  # consumers, and the sum of their prefetch windows
NO_FIGURES = QueueFigures()  # a queue the figures leave out: no depth (never changed)
NO_CONSUMERS: Window = (0, 0)
# what a queue's `QueueInfo` was built from (listing, figures, window), it, and its key
Built = tuple[QueueInfo, QueueFigures | None, Window | None, QueueInfo, QueueKey]


def merged(info: QueueInfo, got: QueueFigures | None, window: Window | None) -> QueueInfo:
    """The listed queue with the figures as its depth (None: keep the listing's own, read
    in this poll) and its consumers' window (None: not read)."""
    changes: dict[str, int | None] = {}
    if got is not None:
        changes.update(messages=got.messages, bytes=got.bytes, unacked=got.unacked)
    if window is not None:
        changes.update(consumers=window[0], unacked_limit=window[1])
    return replace(info, **changes) if changes else info  # type: ignore[arg-type]


class MergedQueues:
    """Merges each poll's parts, keeping the `QueueInfo` of a queue whose parts are the
    same objects (figures, listing) or equal (window) as the poll before."""

    def __init__(self) -> None:
        self._built: dict[QueueKey, Built] = {}

    def merge(self, listed: Iterable[QueueInfo], figures: Mapping[QueueKey, QueueFigures],
              read_alone: Collection[QueueKey] = (),
              windows: Mapping[QueueKey, Window] | None = None) -> list[QueueInfo]:
        """The listed queues with the figures as their depth and their consumers' windows.
        A queue without figures has no depth (None), whatever an older listing said,
        unless it was read on its own in this poll (`read_alone`): those figures are the
        management API's of now. RabbitMQ 3.x writes a queue name with a `"` or `\\` into
        its labels unescaped, so such a queue has no figures of its own name and is read
        that way every poll."""
        built, out = self._built, []
        kept: dict[QueueKey, Built] = {}
        for info in listed:
            key = (info.vhost, info.name)
            got = figures.get(key)
            if got is None and key not in read_alone:
                got = NO_FIGURES
            window = None if windows is None else windows.get(key, NO_CONSUMERS)
            last = built.get(key)
            if last is not None and last[0] is info and last[1] is got and last[2] == window:
                # the same tuple and key: new ones per queue and poll, kept until the next,
                # gave the garbage collector 20,000 objects more to walk every poll
                kept[last[4]] = last
                out.append(last[3])
                continue
            queue = merged(info, got, window)
            kept[key] = (info, got, window, queue, key)
            out.append(queue)
        self._built = kept
        return out

