"""A queue's effective policy definition, worked out from the policy lists.

`/api/queues` gives each queue's merged policy and operator policy as
`effective_policy_definition`, but only from the management statistics: a RabbitMQ 4.x
with `management_metrics_collection` denied leaves it out (and a 4.x queue has none for its
first 4.5-6 s). Its policy limits (`max-length`, `max-length-bytes`, `overflow`) would then
be ignored and its default thresholds lost. RabbitMQ's rules, mirrored here: the policy
the listing names (`policy`), else the highest-priority policy whose pattern matches the
queue's name and whose `apply-to` covers its type; the same for operator policies; where
both set a numeric key the smaller value wins (the operator's limits are a ceiling),
otherwise the policy's value. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# `apply-to` values that cover a queue of each type (4.x adds the per-type ones)
COVERS = {"classic": {"all", "queues", "classic_queues"},
          "quorum": {"all", "queues", "quorum_queues"},
          "stream": {"all", "queues", "streams"}}


def _matches(policy: Mapping[str, Any], vhost: str, name: str, queue_type: str) -> bool:
    if policy.get("vhost") != vhost:
        return False
    if policy.get("apply-to", "all") not in COVERS.get(queue_type, {"all", "queues"}):
        return False
    try:
        return re.search(str(policy.get("pattern", "")), name) is not None
    except re.error:  # an Erlang regex Python cannot read: not ours to apply
        return False


def _chosen(policies: Iterable[Mapping[str, Any]], vhost: str, name: str, queue_type: str,
            named: str | None) -> dict[str, Any]:
    best: Mapping[str, Any] | None = None
    for policy in policies:
        if named is not None:
            if policy.get("vhost") == vhost and policy.get("name") == named:
                best = policy
                break
        elif _matches(policy, vhost, name, queue_type) and (
                best is None or int(policy.get("priority", 0)) > int(best.get("priority", 0))):
            best = policy
    definition = best.get("definition") if best is not None else None
    return dict(definition) if isinstance(definition, dict) else {}


def effective_definition(vhost: str, name: str, queue_type: str, policy_name: str | None,
                         policies: Iterable[Mapping[str, Any]],
                         operator_policies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The merged definition RabbitMQ applies to the queue (see the module's rules)."""
    merged = _chosen(policies, vhost, name, queue_type, policy_name)
    for key, value in _chosen(operator_policies, vhost, name, queue_type, None).items():
        mine = merged.get(key)
        if isinstance(mine, int) and isinstance(value, int) and not isinstance(mine, bool):
            merged[key] = min(mine, value)
        elif key not in merged:
            merged[key] = value
    return merged
