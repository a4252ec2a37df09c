"""Qpid Broker-J adapter: queues and their flow state from its REST management API.

UNTESTED AGAINST A LIVE BROKER: no Broker-J can run on the machines this was built on.
It is tested against answers recorded from Broker-J's documentation and source
(tests/unit/test_broker_j.py); docs/qpid.md ("Broker-J") says so too.

Broker-J enforces producer flow control itself, so, as with Qpid C++, each queue comes with
the broker's own state (`queueFlowStopped`) and the sidecar reports it. Broker-J keeps no
flow counter: `flowStoppedCount` is the sidecar's count of the OFF -> ON changes it saw
(kept across restarts like any other).
Queues are read per virtual host: `GET /api/latest/virtualhostnode`, then
`/api/latest/virtualhost/{node}` and `/api/latest/queue/{node}/{vhost}`. Depth is
`queueDepthMessages` and `queueDepthBytes` (in the object's `statistics` map since 6.1).

Thresholds, in either of Broker-J's two models, as its code applies them (not as the 0.x
documentation in the seeds words them):
- up to 6.x: `queueFlowControlSizeBytes` (stop: overfull above it) and
  `queueFlowResumeSizeBytes` (resume; its default is 0: resume when empty), bytes only;
- 7.0 on: `overflowPolicy: PRODUCER_FLOW_CONTROL` with `maximumQueueDepthBytes` and
  `maximumQueueDepthMessages` as stops (-1: none; 0 is enforced: overfull with anything
  on the queue), and the context variable `queue.queueFlowResumeLimit` (a percentage, 80
  by default; 0 resumes when empty), which a queue may inherit from its virtual host,
  node or broker: the queues are read with `excludeInheritedContext=false`, without
  which the REST API shows only the queue's own context. Each resume is
  ceil(max × limit / 100) (`ProducerFlowControlOverflowPolicyHandler`). Broker-J resumes
  at or below that figure (Qpid C++ and the sidecar: strictly below), which only matters
  for what is shown: the state is Broker-J's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import requests

from sidecar.broker import json_int
from sidecar.broker.failover import ManagementHttp
from sidecar.broker.figures import FigureCheck
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.queue_limits import LimitNames, QueueLimits, non_negative_int
from sidecar.flow.thresholds import Level, Resolution, Source, Thresholds
from sidecar.model import BrokerFlow, QueueInfo
from sidecar.signals.exchange_routing import Binding, Topology

API = "/api/latest"
RESUME_LIMIT = "queue.queueFlowResumeLimit"
DEFAULT_RESUME_PERCENT = 80.0
# a queue's context with what it inherits (queue.queueFlowResumeLimit set on its vhost,
# node or broker); the REST API leaves inherited context out unless asked
INHERITED_CONTEXT = {"excludeInheritedContext": "false"}
NAMES = LimitNames("maximumQueueDepthMessages", "maximumQueueDepthBytes",
                   "maximumQueueDepthBytes")
# The attributes that decide a queue's thresholds: kept as the queue's "arguments", so that
# the engine resolves again when one of them changes.
FLOW_ATTRIBUTES = ("queueFlowControlSizeBytes", "queueFlowResumeSizeBytes", "overflowPolicy",
                   "maximumQueueDepthBytes", "maximumQueueDepthMessages")
FIGURES = ("queueDepthMessages", "queueDepthBytes")


def _resume_percent(item: Mapping[str, Any]) -> float:
    context = item.get("context")
    raw = context.get(RESUME_LIMIT) if isinstance(context, Mapping) else None
    try:
        percent = float(raw) if raw is not None else DEFAULT_RESUME_PERCENT
    except (TypeError, ValueError):
        return DEFAULT_RESUME_PERCENT
    # Broker-J refuses a limit outside 0..100; 0 is a limit (resume when empty)
    return percent if 0.0 <= percent <= 100.0 else DEFAULT_RESUME_PERCENT


def _level_7(maximum: int | None, percent: float) -> Level | None:
    if maximum is None or maximum < 0:  # -1: no maximum; 0 is one, and enforced
        return None
    return Level(maximum, min(maximum, math.ceil(percent / 100.0 * maximum)))


def thresholds_of(item: Mapping[str, Any]) -> Thresholds:
    """The stop and resume levels a Broker-J queue object declares (either model)."""
    capacity = json_int(item.get("queueFlowControlSizeBytes"))
    if capacity is not None and capacity > 0:
        resume = json_int(item.get("queueFlowResumeSizeBytes")) or 0  # 0: when empty
        return Thresholds(size=Level(capacity, min(resume, capacity)))
    if str(item.get("overflowPolicy", "")).upper() != "PRODUCER_FLOW_CONTROL":
        return Thresholds()
    percent = _resume_percent(item)
    return Thresholds(count=_level_7(json_int(item.get("maximumQueueDepthMessages")), percent),
                      size=_level_7(json_int(item.get("maximumQueueDepthBytes")), percent))


def store_quota(vhost: Mapping[str, Any]) -> dict[str, int]:
    """A virtual host's `storeOverfullSize` / `storeUnderfullSize` as a vhost quota (the
    API's names); {} when it sets none (0 or less: no limit). Broker-J measures its store
    on disk; the sidecar applies the quota to the sum of the vhost's queue bytes."""
    over = json_int(vhost.get("storeOverfullSize"))
    if over is None or over <= 0:
        return {}
    under = json_int(vhost.get("storeUnderfullSize"))
    return {"overfullSize": over} | ({"underfullSize": under} if under and under > 0 else {})


def queue_from_json(vhost: str, item: Mapping[str, Any], check: FigureCheck) -> QueueInfo:
    """Map one queue object of the REST API to a QueueInfo with Broker-J's flow state;
    `check` vets the depth figures."""
    stats = item.get("statistics")
    figures = stats if isinstance(stats, Mapping) else item
    thresholds = thresholds_of(item)
    stopped = bool(item.get("queueFlowStopped"))
    overflow = str(item.get("overflowPolicy") or "none").lower()
    name = str(item["name"])
    messages, nbytes = check.figures(vhost, name, figures, FIGURES)
    return QueueInfo(
        vhost=vhost,
        name=name,
        messages=messages,
        bytes=nbytes,
        arguments={k: item[k] for k in FLOW_ATTRIBUTES if k in item}
        | {RESUME_LIMIT: _resume_percent(item)},
        queue_type=str(item.get("type") or "standard"),
        limits=QueueLimits(non_negative_int(item.get("maximumQueueDepthMessages")),
                           non_negative_int(item.get("maximumQueueDepthBytes")), overflow,
                           NAMES),
        broker_flow=BrokerFlow(
            stopped=stopped,
            stopped_count=None,  # Broker-J keeps no counter: the sidecar counts
            resolution=Resolution(thresholds,
                                  Source.ARGUMENTS if thresholds.count else Source.NONE,
                                  Source.ARGUMENTS if thresholds.size else Source.NONE),
        ),
    )


class BrokerJAdapter:
    """Reads every virtual host's queues from one Broker-J REST endpoint."""

    def __init__(self, url: str, user: str, password: str, *, timeout: float = 5.0,
                 session: requests.Session | None = None) -> None:
        self.http = ManagementHttp([url], user, password, timeout=timeout, session=session)
        self.figures = FigureCheck()
        self._quotas: dict[str, dict[str, int]] = {}

    def _get_list(self, path: str, params: dict[str, Any] | None = None
                  ) -> list[dict[str, Any]]:
        body = self.http.get_json(path, params)
        if isinstance(body, dict):  # one object asked for by its full path
            body = [body]
        return [item for item in body if isinstance(item, dict)] if isinstance(body, list) else []

    def _vhosts(self) -> list[tuple[str, str]]:
        """(virtual host node, virtual host) of every virtual host; notes their quotas."""
        found, quotas = [], {}
        for node in self._get_list(f"{API}/virtualhostnode"):
            node_name = str(node.get("name", ""))
            for vhost in self._get_list(f"{API}/virtualhost/{quote(node_name, safe='')}"):
                name = str(vhost.get("name", ""))
                found.append((node_name, name))
                quota = store_quota(vhost)
                if quota:
                    quotas[name] = quota
        self._quotas = quotas
        return found

    def vhost_quotas(self) -> dict[str, dict[str, int]]:
        """Each virtual host's store quota as last read (`ReportsVhostQuotas`)."""
        return dict(self._quotas)

    def fetch_queues(self) -> list[QueueInfo]:
        """Every queue of every virtual host, with Broker-J's flow state."""
        queues: list[QueueInfo] = []
        for node, vhost in self._vhosts():
            path = f"{API}/queue/{quote(node, safe='')}/{quote(vhost, safe='')}"
            queues.extend(queue_from_json(vhost, item, self.figures)
                          for item in self._get_list(path, INHERITED_CONTEXT)
                          if self.figures.named(item, ("name",)) is not None)
        return queues

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        """None read: Broker-J reports no RabbitMQ-style node alarms (its disk quota is per
        virtual host, which the vhost quotas cover)."""
        return {}

    def fetch_vhosts(self) -> set[str]:
        """Every virtual host of every virtual host node."""
        return {vhost for _, vhost in self._vhosts()}

    def fetch_topology(self) -> Topology:
        """Exchanges with their `bindings` attribute (queue destinations)."""
        exchanges: dict[tuple[str, str], str] = {}
        bindings: list[Binding] = []
        for node, vhost in self._vhosts():
            path = f"{API}/exchange/{quote(node, safe='')}/{quote(vhost, safe='')}"
            for item in self._get_list(path):
                name = str(item.get("name", ""))
                exchanges[(vhost, name)] = str(item.get("type", ""))
                for b in item.get("bindings") or []:
                    if isinstance(b, dict) and "destination" in b:
                        bindings.append(Binding(vhost, name, str(b["destination"]), "queue",
                                                str(b.get("bindingKey", ""))))
        return Topology.build(exchanges, bindings)

    def close(self) -> None:
        self.http.close()
