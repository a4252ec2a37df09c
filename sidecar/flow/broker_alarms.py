"""RabbitMQ's memory and disk alarms, as pure rules: what is raised, and what it stops.

When any node of a RabbitMQ cluster goes above its `vm_memory_high_watermark` or below
its `disk_free_limit`, RabbitMQ blocks every publishing connection of the whole cluster,
whatever the queue. The management API shows it per node (`/api/nodes`: `mem_alarm`,
`disk_free_alarm`). A producer polling `/flow` must hear about it, or it is told
"flowing" while the broker itself holds its messages.

A node listed as not running (`running: false`) has no alarms: RabbitMQ clears a dead
node's alarms itself ("resource limit alarm cleared for dead node") and lets publishers
through. Otherwise missing data never clears an alarm: a running node that answers
without the alarm fields keeps what was last known of it, and a node list that leaves
out a node last seen alarmed (without listing it as down) is a bad read, like an empty
one: a partial answer must not release producers. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from sidecar.flow.stop_reasons import StoppedBy, StopReason


class Resource(StrEnum):
    """The two resources RabbitMQ raises alarms for."""

    MEMORY = "memory"
    DISK = "disk"


WHY = {
    Resource.MEMORY: "memory use above vm_memory_high_watermark",
    Resource.DISK: "free disk space below disk_free_limit",
}


@dataclass(frozen=True, order=True)
class NodeAlarm:
    """One raised alarm of one node."""

    node: str
    resource: Resource


@dataclass(frozen=True)
class NodeStatus:
    """One node's alarm flags and whether it runs, as read; None where the answer did not
    say."""

    memory: bool | None
    disk: bool | None
    running: bool | None = None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def node_statuses(items: object) -> dict[str, NodeStatus] | None:
    """`/api/nodes` items as {node: NodeStatus}; None when the answer is not a node list
    (then nothing can be concluded and the caller keeps what it knew)."""
    if not isinstance(items, list):
        return None
    return {str(item["name"]): NodeStatus(_flag(item.get("mem_alarm")),
                                          _flag(item.get("disk_free_alarm")),
                                          _flag(item.get("running")))
            for item in items if isinstance(item, dict) and "name" in item}


def unlisted_alarmed(known: Iterable[NodeAlarm], read: Mapping[str, NodeStatus]) -> list[str]:
    """Nodes with alarms in force that `read` does not list: such a read cannot clear them
    (a node answering for a cluster knows every member, down ones included)."""
    return sorted({alarm.node for alarm in known if alarm.node not in read})


def merge(known: Iterable[NodeAlarm], read: Mapping[str, NodeStatus]) -> frozenset[NodeAlarm]:
    """The alarms in force after a read: what each running listed node says, its last
    known state where it says nothing, and nothing for nodes down or no longer listed
    (`unlisted_alarmed` tells a read that should be refused for leaving one out)."""
    before = set(known)
    now: set[NodeAlarm] = set()
    for node, status in read.items():
        if status.running is False:
            continue
        for resource, flag in ((Resource.MEMORY, status.memory), (Resource.DISK, status.disk)):
            alarm = NodeAlarm(node, resource)
            if flag or (flag is None and alarm in before):
                now.add(alarm)
    return frozenset(now)


def alarm_reason(alarm: NodeAlarm) -> StopReason:
    """The stop reason a queue shows while `alarm` is raised."""
    return StopReason(StoppedBy.BROKER_ALARM, f"{alarm.resource} alarm on node {alarm.node} "
                                              f"({WHY[alarm.resource]}): RabbitMQ blocks "
                                              "every publisher")


def alarm_lines(before: frozenset[NodeAlarm], after: frozenset[NodeAlarm]) -> list[str]:
    """Operator log lines for alarms raised and cleared (RabbitMQ's own log has the same
    events; these say that the sidecar now tells producers)."""
    raised = [f"[node({a.node})] {a.resource} alarm raised ({WHY[a.resource]}): flow control "
              "enforced on every queue" for a in sorted(after - before)]
    cleared = [f"[node({a.node})] {a.resource} alarm cleared" for a in sorted(before - after)]
    return raised + cleared
