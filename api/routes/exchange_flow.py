"""`GET /flow/exchange/{vhost}/{exchange}?routing_key=K`: flow for a message routed by an
exchange, stopped while any destination queue is stopped (Qpid completes a transfer only
when flow is off for all its destinations). The default exchange is `amq.default`, or its
real name "" as an empty last segment (`/flow/exchange/%2F/`). Its vhost's quota and the
broker's alarms stop it too, even when the key reaches no queue: RabbitMQ blocks the
publishing connection itself, wherever the message would go.

Long-poll works as on `/flow`. The answer's `version` is a digest of the destinations and
their versions: it changes whenever any destination's answer changes or the bindings send
the message elsewhere. A waiting request re-reads the bindings every poll interval, so a
new binding to a stopped queue reaches it within one interval.
"""

from __future__ import annotations

import hashlib
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.answers import Answers, stop_reasons_json
from api.deps import AnswersDep, HubDep, TopologyDep, VhostDep
from api.edge.direct_writes import stopping
from api.lookups import FlowQuery, FlowQueryDep, note_producer, require_polled, routed_queues
from api.path_segments import segment
from api.producer_guard import PRODUCER_ANSWERS
from api.schemas import ExchangeFlowAnswer, Problem
from sidecar.flow.engine import FlowEngine
from sidecar.flow.producer_classes import stopped_by_name
from sidecar.flow.stop_reasons import StopReason
from sidecar.model import QueueKey
from sidecar.signals.bindings_cache import TopologyCache
from sidecar.signals.change_fanout import ChangeHub

router = APIRouter(tags=["flow"])


def exchange_view(engine: FlowEngine, vhost: str, exchange: str, routing_key: str,
                  queues: set[str], producer_class: str | None = None) -> dict[str, Any]:
    """The combined answer and each destination's part in it; for a producer of
    `producer_class`, a destination where that class is stopped is stopped too."""
    parts = []
    wide = engine.broker_wide.reasons(vhost)
    reasons: dict[StopReason, None] = {}  # every destination's, then the vhost's, once each
    held = False  # the producer's class is stopped on some destination
    for name in sorted(queues):
        entry = engine.entry((vhost, name))
        class_held = bool(entry and producer_class is not None
                          and Answers.class_stopped(entry, producer_class))
        held = held or class_held
        parts.append({"queue": name, "known": entry is not None,
                      "flowStopped": bool(entry and entry.told_stopped) or class_held,
                      "version": entry.version if entry else 0})
        reasons.update(dict.fromkeys(entry.stop_reasons if entry else ()))
    reasons.update(dict.fromkeys(wide))
    stopped_by = [p["queue"] for p in parts if p["flowStopped"]]
    digest = hashlib.blake2b(repr(([(p["queue"], p["version"]) for p in parts], wide)).encode(),
                             digest_size=6).digest()  # 48 bits: exact in JSON numbers
    told = stop_reasons_json(tuple(reasons))
    if held and producer_class is not None:
        told["flowStoppedBy"].append(stopped_by_name(producer_class))
        told["flowStopReasons"].append({"by": stopped_by_name(producer_class), "detail": (
            f"producer class {producer_class} is stopped on a destination")})
    return {
        "vhost": vhost, "exchange": exchange, "routingKey": routing_key,
        "flowStopped": bool(stopped_by or wide), "stoppedBy": stopped_by,
        **told, "destinations": parts,
        "stale": any(e.stale for n in queues if (e := engine.entry((vhost, n)))),
        "version": int.from_bytes(digest, "big"),
    }


_ANSWERS: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such exchange"},
    503: {"model": Problem, "description": "the broker is not read yet"},
    **PRODUCER_ANSWERS}
RoutingKey = Annotated[str, Query(max_length=255, description="the routing key")]


@router.get("/flow/exchange/{vhost}/{exchange}", response_model=ExchangeFlowAnswer,
            responses=_ANSWERS)
async def exchange_flow(
    vhost: VhostDep, exchange: str, query: FlowQueryDep, answers: AnswersDep, hub: HubDep,
    topology: TopologyDep, routing_key: RoutingKey = "",
) -> dict[str, Any]:
    """Flow state for publishing to `exchange` with `routing_key`."""
    return await routed_flow(answers, hub, topology, vhost, segment(exchange, "exchange"),
                             routing_key, query)


@router.get("/flow/exchange/{vhost}/", response_model=ExchangeFlowAnswer, responses=_ANSWERS)
async def default_exchange_flow(
    vhost: VhostDep, query: FlowQueryDep, answers: AnswersDep, hub: HubDep,
    topology: TopologyDep, routing_key: RoutingKey = "",
) -> dict[str, Any]:
    """Flow state for publishing to the default exchange by its real name, "" (an empty
    last segment); the same as `amq.default`."""
    return await routed_flow(answers, hub, topology, vhost, "", routing_key, query)


async def routed_flow(answers: Answers, hub: ChangeHub, topology: TopologyCache, vhost: str,
                      name: str, routing_key: str, query: FlowQuery) -> dict[str, Any]:
    """The exchange's answer, after waiting for a change when asked to."""
    engine = answers.engine
    require_polled(engine)
    queues: set[str] = set()

    async def read() -> tuple[dict[str, Any], int, list[QueueKey]]:
        nonlocal queues
        queues = await routed_queues(topology, vhost, name, routing_key)
        view = exchange_view(engine, vhost, name, routing_key, queues, query.producer_class)
        # only known queues: a waiter on a queue that does not exist would never be woken
        return view, view["version"], [(vhost, q) for q in queues
                                       if engine.entry((vhost, q)) is not None]

    asked_at = time.time()
    with stopping(query.scope) as until:
        view = await hub.long_poll(read, query.since, query.wait, recheck=topology.max_age,
                                   until=until)
    # a producer asking about an exchange produces to each of its destinations
    for entry in filter(None, (engine.entry((vhost, q)) for q in queues)):
        note_producer(answers, entry, query, asked_at)
    return view
