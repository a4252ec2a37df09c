"""The history's `settings` records (docs/history.md#type-settings): when a queue's producer
classes change, and when pacing is first used on it, the moments the pipeline's graded
report compares before and after (`pipeline.graded`).

Both are noticed off the `/flow` path. Classes: a version watcher of the engine (every
change of a queue's classes moves its version, whether set or removed through the API,
through a vhost's default, or adopted from another replica) compares the queue's classes
with the ones last recorded, by identity first. Pacing: the producer reports call
`pacing_used` when a producer they hold nothing of reports on a queue, a set lookup; the
record waits for the recorder's next poll batch. Once per queue per process: a restart
writes it again at the queue's first report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from sidecar.flow.engine import FlowEngine
from sidecar.flow.queue_entry import NO_CLASSES, QueueEntry
from sidecar.model import QueueKey

Record = dict[str, Any]


def settings_record(key: QueueKey, ts: float, *, classes: Mapping[str, Fraction] | None = None,
                    pacing: bool = False) -> Record:
    """One `settings` record: the queue's producerClasses (`{}`: none now) and/or
    `"pacing": true`."""
    record: Record = {"type": "settings", "ts": round(ts, 3), "vhost": key[0],
                      "queue": key[1]}
    if classes is not None:
        record["producerClasses"] = {name: float(share) for name, share in classes.items()}
    if pacing:
        record["pacing"] = True
    return record


class SettingsHistory:
    """Which classes each sampled queue was last recorded with, and the queues pacing was
    used on; `put` hands records to the recorder's writer."""

    def __init__(self, put: Callable[[list[Record]], None],
                 clock: Callable[[], float]) -> None:
        self.put = put
        self.clock = clock
        # each queue's classes as of its first sample or its last record (no entry: not
        # sampled yet; its first sample notes what it starts with, a restart included)
        self._classes: dict[QueueKey, Mapping[str, Fraction]] = {}
        self._paced: set[QueueKey] = set()
        self._waiting: list[Record] = []  # pacing records for the next poll's batch

    def seed(self, entry: QueueEntry) -> None:
        """A queue's first sample: the classes it has from the start are no change."""
        self._classes.setdefault(entry.key, entry.producer_classes)

    def forget(self, key: QueueKey) -> None:
        """A deleted queue: a new one of that name starts afresh."""
        self._classes.pop(key, None)

    def on_version(self, engine: FlowEngine, key: QueueKey) -> None:
        """Engine version watcher: a record when the queue's classes are not the ones it
        was last recorded with."""
        known = self._classes.get(key)
        entry = engine.entry(key)
        if known is None or entry is None:
            return
        classes = entry.producer_classes
        if classes is known or classes == known:
            return
        self._classes[key] = classes or NO_CLASSES
        self.put([settings_record(key, self.clock(), classes=classes)])

    def pacing_used(self, key: QueueKey) -> None:
        """A producer reported on the queue (`X-Producer-Published`): a record the first
        time in this process."""
        if key not in self._paced:
            self._paced.add(key)
            self._waiting.append(settings_record(key, self.clock(), pacing=True))

    def flush(self) -> None:
        """Hand the waiting pacing records over (each poll, and at close)."""
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            self.put(waiting)
