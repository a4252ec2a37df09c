"""`GET /flow/exchange/{vhost}/{exchange}?routing_key=K`: flow for a message routed by an
exchange, stopped while any destination queue is stopped (Qpid completes a transfer only
when flow is off for all its destinations). The default exchange is `amq.default`.

Long-poll works as on `/flow`: the answer's `version` is the sum of the destinations'
versions, which grows whenever any of them changes.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request

from api.deps import EngineDep, HubDep, ProducersDep, VhostDep
from api.paths import segment
from api.routes.flow import FlowQuery, FlowQueryDep
from api.views import record_producer
from sidecar.broker import BrokerError
from sidecar.engine import FlowEngine
from sidecar.routing import destinations
from sidecar.topology import TopologyCache

router = APIRouter(tags=["flow"])


def exchange_view(engine: FlowEngine, vhost: str, exchange: str, routing_key: str,
                  queues: set[str]) -> dict[str, Any]:
    """The combined answer and each destination's part in it."""
    parts = []
    for name in sorted(queues):
        entry = engine.queues.get((vhost, name))
        parts.append({"queue": name, "known": entry is not None,
                      "flowStopped": bool(entry and entry.told_stopped),
                      "version": entry.version if entry else 0})
    stopped_by = [p["queue"] for p in parts if p["flowStopped"]]
    return {
        "vhost": vhost, "exchange": exchange, "routingKey": routing_key,
        "flowStopped": bool(stopped_by), "stoppedBy": stopped_by, "destinations": parts,
        "stale": any(e.stale for n in queues if (e := engine.queues.get((vhost, n)))),
        "version": sum(p["version"] for p in parts),
    }


@router.get("/flow/exchange/{vhost}/{exchange}")
async def exchange_flow(
    vhost: VhostDep, exchange: str, request: Request, query: FlowQueryDep,
    engine: EngineDep, hub: HubDep, producers: ProducersDep,
    routing_key: Annotated[str, Query(max_length=255, description="the routing key")] = "",
) -> dict[str, Any]:
    """Flow state for publishing to `exchange` with `routing_key`."""
    name = segment(exchange, "exchange")
    topology_cache: TopologyCache = request.app.state.topology
    try:
        topology = await topology_cache.get()
    except BrokerError as exc:
        raise HTTPException(503, f"cannot read the broker's bindings: {exc}") from None
    queues = destinations(topology, vhost, name, routing_key)
    if queues is None:
        raise HTTPException(404, f"exchange {name!r} in vhost {vhost!r} is not known to the "
                                 "broker")
    view = exchange_view(engine, vhost, name, routing_key, queues)
    if query.wait and query.since is not None and view["version"] == query.since:
        await hub.wait([(vhost, q) for q in queues], query.wait)
        view = exchange_view(engine, vhost, name, routing_key, queues)
    _note_producer(engine, producers, vhost, queues, query)
    return view


def _note_producer(engine: FlowEngine, producers: ProducersDep, vhost: str, queues: set[str],
                   query: FlowQuery) -> None:
    """A producer asking about an exchange produces to each of its destinations."""
    if query.producer_id is None:
        return
    for name in queues:
        entry = engine.queues.get((vhost, name))
        if entry is not None:
            record_producer(producers, entry, query.producer_id, query.capacity, time.time())
