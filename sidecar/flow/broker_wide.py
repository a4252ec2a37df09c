"""Broker-wide flow control: vhost quotas, per-vhost default thresholds, RabbitMQ's alarms.

Broker-J stops every producer of a virtual host whose store is overfull (MST-1008) and
RabbitMQ blocks every publisher of the cluster while a node has a memory or disk alarm.
This is the state of both, beside the engine's per-queue table: each vhost's quota (stored
through the API, else the broker's own, Broker-J's `storeOverfullSize`), its
quota machine (stepped by the queues' own `state_machine.step`) and its overfull
counter, the vhost's default queue thresholds (Broker-J's virtual-host `capacity` and
`flowResumeCapacity`), and the alarms last read from `/api/nodes`. `reasons(vhost)` is
what every queue of that vhost must show because of them.

It changes only in memory; the engine, which owns it, commits the vhost states it
changed (`take_pending`) in the same transaction as the queue states and webhook events
they cause, and undoes it (`snapshot`/`restore`) when that transaction fails. The alarms
are never persisted: they are the broker's to say, read again on every poll.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from sidecar.flow.broker_alarms import (
    NodeAlarm,
    NodeStatus,
    alarm_lines,
    alarm_reason,
    merge,
    unlisted_alarmed,
)
from sidecar.flow.persistence import FlowStore, StoredVhostState
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.stop_reasons import OnStale, StoppedBy, StopReason
from sidecar.flow.vhost_quota import QUOTA_MESSAGES, QUOTA_SIZE, quota_thresholds
from sidecar.records.log_lines import store_line

log = logging.getLogger("flow_sidecar.flow")
QUOTA, DEFAULTS = "quota", "defaults"  # the two kinds of stored vhost settings


# A vhost's quota machine is its stored state (overfull or not, how often it went
# overfull, when it last changed: they survive restarts, like flowStoppedCount); a vhost
# never seen is OFF with a zero counter.
NEVER_OVERFULL = StoredVhostState(False, 0, None)


Snapshot = tuple[dict[str, dict[str, float]], dict[str, dict[str, float]],
                 dict[str, StoredVhostState], dict[str, StoredVhostState], list[str]]


class BrokerWide:
    """See the module docstring."""

    def __init__(self, store: FlowStore) -> None:
        self._quotas = store.load_vhost_settings(QUOTA)
        # quotas the broker itself enforces (Broker-J's storeOverfullSize), read every
        # poll; a quota stored through the API wins, as stored settings win for queues
        self._broker_quotas: dict[str, dict[str, float]] = {}
        self._defaults = store.load_vhost_settings(DEFAULTS)
        self._states = dict(store.load_vhost_states())
        self._depths: dict[str, Depth] | None = None  # None until the first poll
        self._dirty: dict[str, StoredVhostState] = {}
        self._lines: list[str] = []
        self._alarms: dict[NodeAlarm, float] = {}  # raised alarm -> when first seen
        self._alarm_reasons: tuple[StopReason, ...] = ()
        self._reasons: dict[str, tuple[StopReason, ...]] = {}  # by vhost, see `reasons`
        # moves whenever `reasons` may answer anything else for any vhost: the engine
        # re-tells every queue then, and only the queues that changed otherwise
        self.generation = 0
        self.alarms_read_at: float | None = None
        self.alarm_error: str | None = None
        self._unread_since: float | None = None  # the alarms could not be read since
        # what producers are told once the alarms are unknown for longer than stale_after
        # (the engine's --on-stale and --stale-after): hold keeps the last known ones
        self.on_unread: tuple[OnStale, float] = ("hold", math.inf)

    # -- the read side ----------------------------------------------------------------
    def reasons(self, vhost: str) -> tuple[StopReason, ...]:
        """Why every queue of `vhost` must stop now, apart from its own state (asked for by
        every queue on every poll: kept until a quota, a vhost state or an alarm changes)."""
        found = self._reasons.get(vhost)
        if found is None:
            found = self._reasons[vhost] = self._quota_reason(vhost) + self._alarm_reasons
        return found

    def quota(self, vhost: str) -> dict[str, float] | None:
        """The vhost's stored quota (a copy), or None."""
        stored = self._quotas.get(vhost)
        return None if stored is None else dict(stored)

    def broker_quota(self, vhost: str) -> dict[str, float] | None:
        """The quota the broker enforces on the vhost itself (a copy), or None."""
        read = self._broker_quotas.get(vhost)
        return None if read is None else dict(read)

    def quota_source(self, vhost: str) -> str | None:
        """Which quota applies: `api` (stored), `broker` (the broker's own) or None."""
        if vhost in self._quotas:
            return "api"
        return "broker" if vhost in self._broker_quotas else None

    def _quota_in_force(self, vhost: str) -> dict[str, float]:
        return self._quotas.get(vhost) or self._broker_quotas.get(vhost) or {}

    def queue_defaults(self, vhost: str) -> dict[str, float] | None:
        """The vhost's default qpid.flow_* thresholds for its queues, or None."""
        return self._defaults.get(vhost)

    def state(self, vhost: str) -> StoredVhostState:
        """The vhost's quota state (OFF with a zero counter when never seen)."""
        return self._states.get(vhost, NEVER_OVERFULL)

    def depth(self, vhost: str) -> Depth | None:
        """The vhost's total depth at the last poll; None before the first one."""
        return None if self._depths is None else self._depths.get(vhost, Depth(0, 0))

    def vhosts(self) -> set[str]:
        """Every vhost with queues, a quota, defaults or a quota history."""
        return set(self._depths or ()) | set(self._quotas) | set(self._broker_quotas) | set(
            self._defaults) | set(self._states)

    def alarms(self) -> list[tuple[NodeAlarm, float]]:
        """The alarms in force and when the sidecar first saw each, by node."""
        return sorted(self._alarms.items())

    # -- changes, in memory: the engine commits them ----------------------------------
    def observe(self, depths: dict[str, Depth], now: float) -> None:
        """A poll's vhost totals: step every vhost quota against them."""
        self._depths = depths
        for vhost in set(self._quotas) | set(self._broker_quotas) | {
                v for v, s in self._states.items() if s.stopped}:
            self._step(vhost, now, "")

    def read_broker_quotas(self, read: Mapping[str, Mapping[str, float]], now: float) -> None:
        """The quotas the broker reported with this poll's queues (before `observe`, which
        steps on them); a vhost whose quota in force changed is stepped at once."""
        before = {v: self._quota_in_force(v) for v in set(self._broker_quotas) | set(read)}
        self._broker_quotas = {v: dict(q) for v, q in read.items()}
        for vhost, quota in before.items():
            if self._quota_in_force(vhost) != quota:
                self._forget_reasons(vhost)
                self._step(vhost, now, "broker quota changed")

    def set_quota(self, vhost: str, values: Mapping[str, float] | None, now: float) -> None:
        """Replace (None: remove) a vhost's quota; it applies at once to the last total."""
        if values is None:
            self._quotas.pop(vhost, None)
        else:
            self._quotas[vhost] = dict(values)
        self._forget_reasons()
        self._step(vhost, now, "quota changed" if values is not None else "quota removed")

    def set_queue_defaults(self, vhost: str, values: Mapping[str, float] | None) -> None:
        """Replace (None: remove) a vhost's default thresholds for its queues."""
        if values is None:
            self._defaults.pop(vhost, None)
        else:
            self._defaults[vhost] = dict(values)

    def read_alarms(self, read: Mapping[str, NodeStatus] | None, now: float,
                    error: str | None = None) -> bool:
        """One `/api/nodes` read (None with `error` when it failed, which changes nothing:
        the last known alarms stay in force; so does a read leaving out an alarmed node).
        True when the alarms in force changed."""
        unlisted = [] if read is None else unlisted_alarmed(self._alarms, read)
        if unlisted:
            read, error = None, (f"the node list leaves out {', '.join(unlisted)}, last "
                                 "seen alarmed and not reported down")
        if read is None:
            if self.alarm_error is None:  # one line per outage, not per poll
                log.warning("broker alarms could not be read: %s; keeping the last known "
                            "alarms for --stale-after, then --on-stale decides", error)
                self._unread_since = now
            self.alarm_error = error
            return self._tell_unread(now)
        if self.alarm_error is not None:
            log.info("broker alarms are read again")
        self.alarms_read_at, self.alarm_error, self._unread_since = now, None, None
        before = frozenset(self._alarms)
        after = merge(before, read)
        self._alarms = {alarm: self._alarms.get(alarm, now) for alarm in after}
        for line in alarm_lines(before, after):
            log.warning(line)
        return self._set_alarm_reasons(tuple(alarm_reason(a) for a in sorted(after)))

    def _tell_unread(self, now: float) -> bool:
        """Alarms unknown for longer than stale_after are what --on-stale says: `stop`
        stops every queue, `go` no longer counts the last known alarms, `hold` keeps them.
        True when the reasons in force changed."""
        on_stale, stale_after = self.on_unread
        if on_stale == "hold" or self._unread_since is None \
                or now - self._unread_since <= stale_after:
            return False
        if on_stale == "go":
            return self._set_alarm_reasons(())
        return self._set_alarm_reasons((StopReason(
            StoppedBy.BROKER_ALARM, "the broker's alarms cannot be read (--on-stale stop)"),))

    def _set_alarm_reasons(self, reasons: tuple[StopReason, ...]) -> bool:
        if reasons == self._alarm_reasons:
            return False
        self._alarm_reasons = reasons
        self._forget_reasons()
        return True

    def _forget_reasons(self, vhost: str | None = None) -> None:
        """`reasons` of `vhost` (None: of all) are to be worked out again."""
        if vhost is None:
            self._reasons.clear()
        else:
            self._reasons.pop(vhost, None)
        self.generation += 1

    def _quota_reason(self, vhost: str) -> tuple[StopReason, ...]:
        if not self.state(vhost).stopped:
            return ()
        thresholds = quota_thresholds(self._quota_in_force(vhost))
        levels = [f"{dim.resume_key}={level.resume:,}" for dim, level in (
            (QUOTA_SIZE, thresholds.size), (QUOTA_MESSAGES, thresholds.count)) if level]
        until = f" until below {' and '.join(levels)}" if levels else ""
        return (StopReason(StoppedBy.VHOST_QUOTA,
                           f"vhost {vhost} store overfull (MST-1008){until}"),)

    def _step(self, vhost: str, now: float, reason: str) -> None:
        """Step one vhost's quota machine against its last total (none yet: no step)."""
        depth = self.depth(vhost)
        if depth is None:
            return
        state = self.state(vhost)
        thresholds = quota_thresholds(self._quota_in_force(vhost))
        new, events = step(FlowState(state.stopped, state.stopped_count), depth, thresholds)
        for event in events:
            self._states[vhost] = self._dirty[vhost] = StoredVhostState(
                new.stopped, new.stopped_count, now)
            self._lines.append(store_line(vhost, event, reason))
            self._forget_reasons(vhost)

    # -- the engine's transaction -------------------------------------------------------
    def take_pending(self) -> tuple[dict[str, StoredVhostState], list[str]]:
        """The vhost states to persist with the next commit (`put_back` them when it
        failed) and the MST lines to log once it succeeded."""
        dirty, self._dirty = self._dirty, {}
        lines, self._lines = self._lines, []
        return dirty, lines

    def put_back(self, states: Mapping[str, StoredVhostState]) -> None:
        """Keep the states a failed commit did not persist for the next one (the engine
        keeps the lines with its own)."""
        for vhost, s in states.items():
            self._dirty.setdefault(vhost, s)

    def snapshot(self) -> Snapshot:
        """Everything a vhost write may change, for `restore` when it cannot commit."""
        return (dict(self._quotas), dict(self._defaults), dict(self._states),
                dict(self._dirty), list(self._lines))

    def restore(self, saved: Snapshot) -> None:
        """Back to a `snapshot`: the write that failed never happened."""
        self._quotas, self._defaults, self._states, self._dirty, self._lines = saved
        self._forget_reasons()
