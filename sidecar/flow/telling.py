"""What a queue's producers are told, and the numbers that say it moved: its stop reasons
and told state (`stop_reasons.combine`), its version (what long polls wait on) and its
revision (what readers' caches stand on), each change noted in the journal for the next
commit. `FlowEngine` owns one and tells it of every entry it changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from sidecar.flow.broker_wide import BrokerWide
from sidecar.flow.journal import Journal
from sidecar.flow.pacing import pace
from sidecar.flow.persistence import StoredState
from sidecar.flow.queue_entry import NO_CLASS_STATES, QueueEntry
from sidecar.flow.state_machine import Depth, EventKind, FlowEvent, FlowState
from sidecar.flow.stop_reasons import OnStale, broker_wide_part, combine, describe_change
from sidecar.model import Change, QueueKey
from sidecar.records.log_lines import transition_line


def step_pacing(entry: QueueEntry, told_stopped: bool, now: float) -> None:
    """Step the queue's pacing (`pacing.pace`) on what it is told now: only a queue that is
    warned, told to stop or paced already pays for it. Rates are worked out when asked
    (`sidecar.signals.pacing_offers`), so nothing here moves the revision."""
    if (entry.warned or told_stopped or entry.pacing.engaged) and entry.depth is not None:
        paced = pace(entry.pacing, entry.warned, told_stopped, entry.depth,
                     entry.resolution.thresholds, now)
        if paced != entry.pacing:
            entry.pacing = paced


class Telling:
    """Re-decides what queues are told and moves their versions and revisions; see the
    module docstring."""

    def __init__(self, journal: Journal, broker_wide: BrokerWide, on_stale: OnStale) -> None:
        self.journal, self.broker_wide = journal, broker_wide
        self.on_stale: OnStale = on_stale
        self.version_clock: Callable[[], float] | None = None  # see `next_version`
        # what a stop's QUE-1003 line appends: who filled the queue (records.filled_by)
        self.stop_note: Callable[[QueueKey, float], str] | None = None
        self._revisions = itertools.count(1)  # shared by all entries: never reused

    def revise(self, entry: QueueEntry) -> None:
        """What the entry's answer shows changed: readers' caches of it are stale (the one
        place a revision moves; a new entry takes the next one too)."""
        entry.revision = next(self._revisions)

    def set_stale(self, entry: QueueEntry, stale: bool) -> None:
        """A flip of `stale` is news for producers whatever --on-stale makes of it (it
        says how far to trust the answer): a new version, which wakes long-pollers."""
        if stale != entry.stale:
            entry.stale = stale
            self.bump(entry)

    def transitions(self, entry: QueueEntry, events: Iterable[FlowEvent], now: float,
                    reason: str) -> None:
        """The machine stepped the queue (its new state set): log and tell each event."""
        for event in events:
            entry.last_transition_at = now
            if not entry.resolution.thresholds.enabled:
                reason = reason or "flow control disabled"
            line = transition_line(entry.vhost, entry.name, event, reason)
            if event.kind is EventKind.OVERFULL and self.stop_note is not None:
                line += self.stop_note(entry.key, now)
            self.journal.pending.lines.append(line)
            self.update_told(entry, now, reason, event)
        self.mark_dirty(entry)

    def update_told(
        self, entry: QueueEntry, now: float, reason: str, event: FlowEvent | None = None
    ) -> None:
        """Re-decide what the queue's producers are told (`stop_reasons.combine`). A change
        of it, a transition, or a broker-wide reason starting or ending is a Change (for
        streams and webhooks); any other change of why only moves the version."""
        reasons = combine(entry.state.stopped, entry.stale, self.on_stale,
                          self.broker_wide.reasons(entry.vhost))
        told = bool(reasons)
        step_pacing(entry, told, now)
        if reasons == entry.stop_reasons and told == entry.told_stopped and event is None:
            return
        wide = (broker_wide_part(entry.stop_reasons), broker_wide_part(reasons))
        entry.stop_reasons = reasons
        self.bump(entry)
        if told == entry.told_stopped and event is None and wide[0] == wide[1]:
            return
        entry.told_stopped = told
        if event is None and wide[0] != wide[1]:
            reason = describe_change(*wide)
        self.journal.pending.changes.append(Change(
            entry.vhost, entry.name, entry.version, told, event, reason,
            entry.state.stopped_count, tuple(r.by for r in reasons)))

    def removed(self, entry: QueueEntry) -> None:
        """A deleted queue loses its state, its classes' included, but keeps its counter
        and version history."""
        entry.version = self.next_version(entry.version)
        entry.class_states, entry.classes_held = NO_CLASS_STATES, False
        pending = self.journal.pending
        pending.bumped.add(entry.key)
        if entry.state.stopped:
            entry.state = FlowState(False, entry.state.stopped_count)
            event = FlowEvent(EventKind.UNDERFULL, entry.depth or Depth(0, 0),
                              entry.resolution.thresholds, entry.state.stopped_count)
            pending.lines.append(transition_line(entry.vhost, entry.name, event,
                                                 "queue deleted"))
        if entry.told_stopped:
            pending.changes.append(Change(entry.vhost, entry.name, entry.version, False, None,
                                          "queue deleted", entry.state.stopped_count))
        self.mark_dirty(entry)

    def bump(self, entry: QueueEntry) -> None:
        entry.version = self.next_version(entry.version)
        self.revise(entry)
        self.journal.pending.bumped.add(entry.key)
        self.mark_dirty(entry)

    def next_version(self, version: int) -> int:
        """+1, or with `version_clock` the clock in ms if that is more: then replicas give
        different answers different versions, and a long-poll moved to another replica
        cannot wait on a version number that replica gave another state."""
        if self.version_clock is None:
            return version + 1
        return max(version + 1, int(self.version_clock() * 1000))

    def mark_dirty(self, entry: QueueEntry) -> None:
        held = () if not entry.classes_held else tuple(
            name for name, state in entry.class_states.items() if state.stopped)
        self.journal.record(entry.key, StoredState(entry.state.stopped,
                                                   entry.state.stopped_count, entry.version,
                                                   held))
