"""The flow history recorder: what every queue did, as JSON Lines for the Spark pipeline.

Operators tune thresholds from evidence: how deep queues got, how long they stayed flow
stopped, how far producers overshot the stop threshold. The recorder keeps that evidence
cheaply. After each poll it writes, per queue, a sample whenever depth or state changed and
at least every `interval` seconds; the engine tells it about every transition, which it
writes as its own record, and about every start and end of a warning episode (`warning`
records), and `settings` records come of `sidecar.records.settings_history`. Live
samples of the hot queues add a sample at each change of
state and at each new peak while flow stopped, so that an episode shorter than a poll
still shows in the history with its start, peak and end (`flow-pipeline` builds episodes
from samples). The format is documented in docs/history.md and read by
`pipeline/`.

Both hooks run on the event loop (`on_change` even inside the engine's SQLite transaction),
so they only build small dicts and enqueue them: a background thread serialises and
appends, one hourly file per UTC hour under `date=YYYY-MM-DD/` partitions, and deletes
partitions past the retention. Each batch is one write, so a crash leaves at most a partial
last line, which the next writer closes with a newline before appending.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from sidecar.flow.engine import FlowEngine
from sidecar.flow.forecast import WarningNote, shown_rate, shown_seconds
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.slices import SLICE, Steps, drain
from sidecar.flow.state_machine import Depth, EventKind
from sidecar.flow.thresholds import COUNT, SIZE, Thresholds, maximum
from sidecar.model import Change, LiveSample, QueueKey
from sidecar.records.settings_history import SettingsHistory

RECORD_COST = 5  # a queue's record costs about as much as five queues that need none
log = logging.getLogger("flow_sidecar.history")
Record = dict[str, Any]
_STOP = object()  # tells the writer thread to finish
BATCH = 10_000  # lines per write


def _levels(thresholds: Thresholds) -> Record:
    out: Record = {}
    if thresholds.count is not None:
        out["stopCount"], out["resumeCount"] = thresholds.count.stop, thresholds.count.resume
    if thresholds.size is not None:
        out["stopSize"], out["resumeSize"] = thresholds.size.stop, thresholds.size.resume
    return out


def sample_record(
    *, ts: float, vhost: str, queue: str, depth: Depth, stopped: bool, stopped_count: int,
    thresholds: Thresholds, max_messages: int | None, max_bytes: int | None,
    told_stopped: bool | None = None, stale: bool = False, publish_rate: float | None = None,
    deliver_rate: float | None = None, producer_capacity: int = 0,
    sources: tuple[str, str] | None = None, ring: bool = False,
) -> Record:
    """One `sample` record (docs/history.md); optional fields are left out when unknown.
    `sources` (count, size) and `ring` let the pipeline leave alone what an operator
    switched off and what Qpid exempts (ring queues)."""
    record: Record = {
        "type": "sample", "ts": round(ts, 3), "vhost": vhost, "queue": queue,
        "messages": depth.messages, "bytes": depth.bytes,
        "flowStopped": stopped, "flowStoppedCount": stopped_count,
        "toldStopped": stopped if told_stopped is None else told_stopped, "stale": stale,
        **_levels(thresholds),
    }
    if sources is not None:
        record["countSource"], record["sizeSource"] = sources
    if ring:
        record["ring"] = True
    for name, value in (("maxMessages", max_messages), ("maxBytes", max_bytes),
                        ("publishRate", publish_rate), ("deliverRate", deliver_rate),
                        ("producerCapacity", producer_capacity or None)):
        if value is not None:
            record[name] = value
    return record


def transition_record(change: Change, ts: float,
                      top_producers: list[Record] | None = None) -> Record:
    """One `transition` record: a change of what producers are told, with its cause; a
    stop's with who filled the queue (`topProducers`, when anyone is known)."""
    record: Record = {
        "type": "transition", "ts": round(ts, 3), "vhost": change.vhost,
        "queue": change.queue, "version": change.version, "toldStopped": change.flow_stopped,
        "reason": change.reason,
    }
    event = change.event
    if event is not None:
        record.update({
            "event": str(event.kind), "flowStopped": event.kind is EventKind.OVERFULL,
            "flowStoppedCount": event.stopped_count, "messages": event.depth.messages,
            "bytes": event.depth.bytes, **_levels(event.thresholds),
        })
        if top_producers and event.kind is EventKind.OVERFULL:
            record["topProducers"] = top_producers
    return record


def warning_record(note: WarningNote, ts: float) -> Record:
    """One `warning` record: a queue's warning episode started (`"event": "warning"`) or
    ended (`"warning-cleared"`); the format is in docs/history.md."""
    record: Record = {
        "type": "warning", "ts": round(ts, 3), "vhost": note.key[0], "queue": note.key[1],
        "event": str(note.event.kind), "episode": note.event.episode,
        "at": round(note.event.at, 3), "startedAt": round(note.event.started_at, 3),
    }
    if note.depth is not None:
        record["messages"] = note.depth.messages
        if note.depth.bytes is not None:
            record["bytes"] = note.depth.bytes
    for name, value in (("secondsToStop", shown_seconds(note.seconds_to_stop)),
                        ("fillRate", shown_rate(note.fill_rate))):
        if value is not None:
            record[name] = value
    return record


def sample_due(shown: tuple[object, ...] | None, sampled_at: float, shows: tuple[object, ...],
               now: float, interval: float) -> bool:
    """A queue gets a sample when what it shows changed from what its last one showed
    (`shown`, None: none yet) or `interval` has passed since that one (`sampled_at`):
    changes are never missed, steady queues cost one line per interval."""
    return shown is None or shown != shows or now - sampled_at >= interval


class HistoryFiles:
    """Appends records to `<directory>/date=YYYY-MM-DD/HH.jsonl` (UTC), one file per hour,
    and deletes date partitions older than `retention_days` (None: keep everything)."""

    def __init__(self, directory: Path, retention_days: int | None = None) -> None:
        self.directory = directory
        self.retention_days = retention_days
        self._hour: int | None = None
        self._file: IO[bytes] | None = None

    def append(self, records: Iterable[Record]) -> int:
        """Write records, each to its hour's file, in writes of up to BATCH whole lines."""
        lines: list[bytes] = []
        written = 0
        for record in records:
            hour = int(record["ts"] // 3600)
            if hour != self._hour:
                written += self._flush(lines)
                self._open(hour)
            lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"))
                         .encode() + b"\n")
            if len(lines) >= BATCH:
                written += self._flush(lines)
        return written + self._flush(lines)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file, self._hour = None, None

    def _flush(self, lines: list[bytes]) -> int:
        if not lines:
            return 0
        assert self._file is not None
        self._file.write(b"".join(lines))
        self._file.flush()
        count = len(lines)
        lines.clear()
        return count

    def _open(self, hour: int) -> None:
        self.close()
        start = datetime.fromtimestamp(hour * 3600, UTC)
        path = self.directory / f"date={start:%Y-%m-%d}" / f"{start:%H}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")
        if self._file.tell() > 0 and not _ends_with_newline(path):
            self._file.write(b"\n")  # close a line a crash left partial
        self._hour = hour
        self.prune(start.date())

    def prune(self, today: date) -> list[Path]:
        """Delete date partitions older than the retention; the ones deleted."""
        if self.retention_days is None or not self.directory.is_dir():
            return []
        oldest = today - timedelta(days=self.retention_days)
        gone = []
        for part in self.directory.glob("date=*"):
            try:
                day = date.fromisoformat(part.name.removeprefix("date="))
            except ValueError:
                continue
            if day < oldest:
                shutil.rmtree(part, ignore_errors=True)
                gone.append(part)
        return gone


def _shows(entry: QueueEntry) -> tuple[object, ...]:
    """What a queue's sample shows: depth, state, told_stopped, stale, thresholds."""
    return (entry.depth, entry.state, entry.told_stopped, entry.stale,
            entry.resolution.thresholds)


def _still(shown: tuple[object, ...], entry: QueueEntry) -> bool:
    """Whether `entry` shows the very objects of `shown` (`_shows`): what a queue the
    polls only dated again does, every poll; equal new ones are for `sample_due`."""
    return (shown[0] is entry.depth and shown[1] is entry.state
            and shown[2] is entry.told_stopped and shown[3] is entry.stale
            and shown[4] is entry.resolution.thresholds)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


class HistoryRecorder:
    """Engine listener and poll hook that records samples and transitions off the loop."""

    def __init__(
        self, directory: Path, *, interval: float = 5.0, retention_days: int | None = 7,
        capacity: Callable[[QueueKey], int] | None = None,
        clock: Callable[[], float] = time.time, max_pending: int = 100_000,
        top_producers: Callable[[QueueKey], list[Record] | None] | None = None,
    ) -> None:
        self.files = HistoryFiles(directory, retention_days)
        self.interval = interval
        self.capacity = capacity
        self.top_producers = top_producers  # who filled a queue at its last stop
        self.clock = clock
        self.dropped = 0
        # records, or a poll's records in one list
        self._pending: queue.Queue[Record | list[Record] | object] = queue.Queue(max_pending)
        # what each queue showed at its last sample, and when: two tables, so that a steady
        # queue's sample keeps its objects (a new tuple per queue and sample, kept until the
        # next, gave the garbage collector 20,000 objects more to walk every interval)
        self._shown: dict[QueueKey, tuple[object, ...]] = {}
        self._sampled_at: dict[QueueKey, float] = {}
        self._peaks: dict[QueueKey, Depth] = {}  # of the episode under way, from live samples
        self._thread: threading.Thread | None = None
        self.settings = SettingsHistory(self._put, clock)  # `settings` records

    def on_poll(self, engine: FlowEngine, now: float) -> None:
        """After a successful poll: a sample for each queue that changed or is due."""
        drain(self.on_poll_in_slices(engine, now))

    def on_poll_in_slices(self, engine: FlowEngine, now: float) -> Steps[None]:
        """`on_poll`, yielding every SLICE queues (`sidecar.flow.slices`)."""
        for key in self._shown.keys() - engine.keys():  # in C: a loop in Python took 2-4 ms
            del self._shown[key], self._sampled_at[key]  # a deleted queue starts afresh
            self._peaks.pop(key, None)
            self.settings.forget(key)
        self.settings.flush()
        due: list[Record] = []
        work = 0  # since the last yield: a queue counts 1, a record RECORD_COST
        for entry in engine.entries():
            if work >= SLICE:
                yield
                work = 0
            work += 1
            key = entry.key
            if entry.depth is None:
                continue
            shown = self._shown.get(key)
            if shown is not None and _still(shown, entry) \
                    and now - self._sampled_at[key] < self.interval:
                continue  # the common case, without a new tuple or a field's __eq__
            shows = _shows(entry)
            if not sample_due(shown, self._sampled_at.get(key, 0.0), shows, now,
                              self.interval):
                continue
            self._note(entry, shows, now)
            due.append(self._sample(engine, entry, now))
            work += RECORD_COST
        if due:  # one hand-over for the poll: a lock per record cost seconds at 100k queues
            self._put(due)

    def on_live(self, engine: FlowEngine, samples: Iterable[LiveSample], now: float) -> None:
        """After live samples: a sample for each queue whose state changed, and for each
        new peak while it is flow stopped; steady depths are left to the polls."""
        for live in samples:
            entry = engine.entry(live.key)
            if entry is None or entry.depth is None:
                continue
            key, depth, shows = entry.key, entry.depth, _shows(entry)
            shown = self._shown.get(key)
            moved = shown is None or shown[1:3] != shows[1:3]  # state, told_stopped
            peak = self._peaks.get(key)
            higher = entry.state.stopped and (
                peak is None or depth.messages > peak.messages
                or (depth.bytes or 0) > (peak.bytes or 0))
            if higher:
                self._peaks[key] = depth if peak is None else Depth(
                    max(depth.messages, peak.messages),
                    None if depth.bytes is None else max(depth.bytes, peak.bytes or 0))
            elif not entry.state.stopped:
                self._peaks.pop(key, None)
            if moved or higher:
                self._note(entry, shows, now)
                self._put(self._sample(engine, entry, now))

    def _note(self, entry: QueueEntry, shows: tuple[object, ...], now: float) -> None:
        """A sample of the queue, showing `shows`, at `now`; an equal `shown` is kept."""
        key = entry.key
        shown = self._shown.get(key)
        if shown is None:
            self.settings.seed(entry)
        if shown != shows:
            self._shown[key] = shows
        self._sampled_at[key] = now

    def on_change(self, change: Change) -> None:
        """Engine listener: one record per transition. Only enqueues (it runs inside the
        engine's SQLite transaction on the event loop)."""
        top = None
        if self.top_producers is not None and change.event is not None \
                and change.event.kind is EventKind.OVERFULL:
            top = self.top_producers((change.vhost, change.queue))
        self._put(transition_record(change, self.clock(), top))

    def on_warning(self, note: WarningNote) -> None:
        """Engine warning listener: one record per episode start and end."""
        self._put(warning_record(note, self.clock()))

    def close(self) -> None:
        """Write what is queued, then stop the writer thread."""
        self.settings.flush()
        if self._thread is not None:
            with contextlib.suppress(queue.Full):  # a writer that is stuck: give up on it
                self._pending.put(_STOP, timeout=5)
            self._thread.join(timeout=10)
            self._thread = None

    def _sample(self, engine: FlowEngine, entry: QueueEntry, now: float) -> Record:
        """The entry as a sample record at `now`."""
        assert entry.depth is not None
        return sample_record(
            ts=now, vhost=entry.vhost, queue=entry.name, depth=entry.depth,
            stopped=entry.state.stopped, stopped_count=entry.state.stopped_count,
            thresholds=entry.resolution.thresholds,
            max_messages=maximum(COUNT, entry.limits, engine.defaults)[0],
            max_bytes=maximum(SIZE, entry.limits, engine.defaults)[0],
            told_stopped=entry.told_stopped, stale=entry.stale,
            publish_rate=entry.info.publish_rate, deliver_rate=entry.info.deliver_rate,
            producer_capacity=self.capacity(entry.key) if self.capacity else 0,
            sources=(str(entry.resolution.count_source), str(entry.resolution.size_source)),
            ring=entry.limits.ring,
        )

    def _put(self, record: Record | list[Record]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="history-writer",
                                            daemon=True)
            self._thread.start()
        try:
            self._pending.put_nowait(record)
        except queue.Full:
            if self.dropped == 0:
                log.warning("history writer is behind; dropping records until it catches up")
            self.dropped += len(record) if isinstance(record, list) else 1

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._pending.get()]
            while not self._pending.empty() and len(batch) < BATCH:
                batch.append(self._pending.get_nowait())
            records: list[Record] = []
            for item in batch:
                if isinstance(item, dict):
                    records.append(item)
                elif isinstance(item, list):
                    records.extend(item)
                else:
                    stop = True  # _STOP
            try:
                self.files.append(records)
            except Exception:  # the writer must outlive a full disk or a bad record
                log.exception("cannot write flow history to %s", self.files.directory)
        self.files.close()
