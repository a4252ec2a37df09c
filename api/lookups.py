"""What several routes answer from: the producer's query of a `/flow` request, the queue and
exchange lookups with the 4xx/503 that say why there is none, and the shared refusals.
One place, so that routes do not import routes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.types import Scope

from api.answers import Answers
from api.edge.protocol import (
    MAX_CAPACITY,
    MAX_CAPACITY_BYTES,
    MAX_PRODUCER_ID,
    MAX_PUBLISHED,
    MAX_WAIT,
)
from api.producer_guard import producer_guard
from api.schemas import defaults_json
from sidecar.broker import BrokerError
from sidecar.flow.engine import FlowEngine, StoreUnavailable
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.signals.bindings_cache import TopologyCache
from sidecar.signals.exchange_routing import destinations


@dataclass(frozen=True)
class FlowQuery:
    """Long-poll parameters and the producer's identity."""

    wait: float | None
    since: int | None
    producer_id: str | None
    capacity: int
    capacity_bytes: int | None
    published: int | None
    scope: Scope = field(repr=False)  # its request's: a graceful stop ends its wait


# documented as a plain integer (absent = not reported), as X-Producer-Capacity-Bytes
ProducerPublished = Annotated[int, Header(ge=0, le=MAX_PUBLISHED, description=(
    "optional, with X-Producer-Id: the producer's count of messages published so far to "
    "this destination (its reports pace it: suggestedRate)"))]


async def flow_query(
    request: Request,
    wait: Annotated[float | None, Query(gt=0, le=MAX_WAIT,
                                        description="seconds to wait for a change")] = None,
    since: Annotated[int | None, Query(ge=0, description="the version already seen")] = None,
    x_producer_id: Annotated[str | None, Header(min_length=1, max_length=MAX_PRODUCER_ID,
                                                description="who is asking")] = None,
    x_producer_capacity: Annotated[int, Header(ge=0, le=MAX_CAPACITY, description=(
        "the producer's window of unconfirmed messages"))] = 0,
    # documented as a plain integer (absent = not declared), not as integer-or-null: a
    # header has no null, and "null" is no number
    x_producer_capacity_bytes: Annotated[int, Header(
        ge=0, le=MAX_CAPACITY_BYTES, description=(
            "optional: the most bytes the producer keeps unconfirmed, for the size "
            "dimension of overflowRisk"))] = None,  # type: ignore[assignment]
    x_producer_published: ProducerPublished = None,  # type: ignore[assignment]
) -> FlowQuery:
    if x_producer_id is not None:  # registering a producer: the guard may refuse it
        producer_guard(request).check(request, x_producer_id)
    return FlowQuery(wait, since, x_producer_id, x_producer_capacity, x_producer_capacity_bytes,
                     x_producer_published, request.scope)


FlowQueryDep = Annotated[FlowQuery, Depends(flow_query)]


def require_polled(engine: FlowEngine) -> None:
    """503 until the broker was read once: before that every queue looks unknown."""
    if not engine.polled_once:
        raise HTTPException(503, "the sidecar has not read the broker yet; retry shortly",
                            headers={"Retry-After": "1"})


def known_entry(engine: FlowEngine, vhost: str, queue: str) -> QueueEntry:
    """The queue's entry, or the 404/503 that explains why there is none."""
    entry = engine.entry((vhost, queue))
    if entry is not None:
        return entry
    require_polled(engine)
    hint = " (settings are stored for it and apply when it appears)" if (
        engine.stored_settings((vhost, queue)) is not None) else ""
    raise HTTPException(404, f"queue {queue!r} in vhost {vhost!r} is not known to the "
                             f"broker{hint}")


def note_report(answers: Answers, key: QueueKey, producer_id: str | None,
                published: int | None, asked_at: float) -> None:
    """Record what the producer says it published, if it said who it is and that."""
    if producer_id is not None:
        answers.record_report(key, producer_id, published, asked_at)


def note_producer(answers: Answers, entry: QueueEntry, query: FlowQuery,
                  asked_at: float) -> None:
    """Note the asking producer (if it said who it is) on the queue it was answered for."""
    if query.producer_id is not None:
        answers.record_producer(entry, query.producer_id, query.capacity, time.time(),
                                capacity_bytes=query.capacity_bytes, asked_at=asked_at)


def refused(problems: list[tuple[str, str]]) -> JSONResponse:
    """422 naming each refused setting, in the shape of a validation error."""
    return JSONResponse(status_code=422, content={"detail": [
        {"loc": ["body", key], "msg": message, "type": "value_error"}
        for key, message in problems]})


def store_failed(exc: StoreUnavailable) -> HTTPException:
    """503 for a write the store could not commit (nothing was changed)."""
    return HTTPException(503, f"{exc}; nothing was changed, retry", headers={"Retry-After": "1"})


def defaults_view(engine: FlowEngine) -> dict[str, Any]:
    """The defaults in effect, their source and the start-up options."""
    return defaults_json(engine.defaults, engine.startup_defaults,
                         from_api=engine.defaults_from_api())


async def routed_queues(topology: TopologyCache, vhost: str, exchange: str,
                        routing_key: str) -> set[str]:
    """The queues a message reaches, or the 503/404 that says why that is not known."""
    try:
        found = destinations(await topology.get(), vhost, exchange, routing_key)
    except BrokerError as exc:
        raise HTTPException(503, f"cannot read the broker's bindings: {exc}") from None
    if found is None:
        raise HTTPException(404, f"exchange {exchange!r} in vhost {vhost!r} is not known to "
                                 "the broker")
    return found
