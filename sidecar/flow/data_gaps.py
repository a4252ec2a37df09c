"""Broker data that answers but says nothing: queues without depth, nodes without alarms.

A broker can answer every poll and still give the sidecar nothing to decide on. RabbitMQ
4.x with the deprecated feature `management_metrics_collection` denied serves `/api/queues`
without `messages` or `message_bytes` for any queue and `/api/nodes` without `mem_alarm`
or `disk_free_alarm`. Each queue is then stale (producers get what `--on-stale` says) and
no alarm can be seen, yet no request failed. This module notices it so that `/healthz`
says degraded with the reason, the log has one ERROR line that names the broker setting
to change, and a metric shows it.

A queue counts as without depth once it has had no figures for longer than `grace`
seconds: a new queue has none for its first seconds (4.5-6 s on 4.x), which is no fault.
Pure: no I/O, no clock; the poller feeds it every successful read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueInfo, QueueKey

STATISTICS_SETTING = ("on RabbitMQ 4.x this is the deprecated feature "
                      "management_metrics_collection denied: set "
                      "deprecated_features.permit.management_metrics_collection = true in "
                      "rabbitmq.conf, or enable rabbitmq_prometheus on every node for "
                      "--depth-source auto or prometheus (--prometheus-url)")


class Gap(StrEnum):
    """The two kinds of missing data."""

    DEPTH = "depth"
    ALARMS = "alarms"


@dataclass(frozen=True)
class Problem:
    """One kind of missing data, with what an operator reads about it."""

    gap: Gap
    text: str


class DataGaps:
    """Which queues have had no depth, and since when the nodes' alarms are unreadable."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._blank_since: dict[QueueKey, float] = {}
        self._queues = 0
        self._alarms_blank_since: float | None = None
        self._reported: dict[Gap, Problem] = {}

    def observe_queues(self, infos: Iterable[QueueInfo], now: float) -> None:
        """One successful queue listing: queues without `messages` start (or keep) their
        blank time; the others and the queues no longer listed leave it."""
        blank: dict[QueueKey, float] = {}
        count = 0
        for info in infos:
            count += 1
            if info.messages is None:
                key = (info.vhost, info.name)
                blank[key] = self._blank_since.get(key, now)
        self._blank_since, self._queues = blank, count

    def observe_nodes(self, nodes: Mapping[str, NodeStatus] | None, now: float) -> None:
        """One node listing (None when it failed: that is a failed read, reported as such,
        and changes nothing here). Unreadable means no node says anything of its alarms."""
        if nodes is None:
            return
        blank = bool(nodes) and all(s.memory is None and s.disk is None
                                    for s in nodes.values())
        if not blank:
            self._alarms_blank_since = None
        elif self._alarms_blank_since is None:
            self._alarms_blank_since = now

    def without_depth(self, now: float) -> int:
        """How many listed queues have had no depth for longer than the grace."""
        return sum(1 for since in self._blank_since.values() if now - since > self.grace)

    def alarms_unreadable(self, now: float) -> bool:
        """Whether no node has said anything of its alarms for longer than the grace."""
        return self._alarms_blank_since is not None and now - self._alarms_blank_since > self.grace

    def problems(self, now: float) -> list[Problem]:
        """What is missing now, worded for an operator."""
        found = []
        blank = self.without_depth(now)
        if blank:
            every = len(self._blank_since) == self._queues  # none has figures
            found.append(Problem(Gap.DEPTH, (
                f"{blank} of {self._queues} queues listed by the broker without a depth "
                f"for over {self.grace:g}s: their "
                "producers get what --on-stale says"
                + (f"; the broker serves no queue statistics at all ({STATISTICS_SETTING})"
                   if every else ""))))
        if self.alarms_unreadable(now):
            found.append(Problem(Gap.ALARMS, (
                f"no node has reported its memory or disk alarm for over {self.grace:g}s: "
                "alarms cannot be seen, the last known ones stay in force "
                f"({STATISTICS_SETTING})")))
        return found

    def news(self, now: float) -> tuple[list[Problem], list[Gap]]:
        """Problems that began and kinds that ended since the last call: one ERROR line
        per outage and one INFO line on recovery, not one per poll. A problem whose
        wording changes (more queues blank) is not news."""
        current = {p.gap: p for p in self.problems(now)}
        began = [p for gap, p in current.items() if gap not in self._reported]
        ended = [gap for gap in self._reported if gap not in current]
        self._reported = current
        return began, ended
