"""`GET /flow/...`: what a producer must do now for a queue (the hot path), and long-poll.

Plain GETs and long polls of known queues are answered by `api.edge.fast_path` before
routing; these routes serve the rest (unknown queues, not-yet-polled, producers under
`--producer-token`, bad input) and document the answer. Long-poll: `?since=VERSION&wait=SECONDS` returns at once when the queue's
`version` is no longer VERSION, else when it changes or the wait ends, whichever is
first (`wait` alone waits for the next change); waiting costs a coroutine, not a thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from starlette.types import Scope

from api.answers import Answers
from api.deps import AnswersDep, HubDep, QueueDep, VhostDep
from api.edge.direct_writes import stopping
from api.edge.protocol import MAX_CAPACITY, MAX_CAPACITY_BYTES, MAX_PRODUCER_ID, MAX_WAIT
from api.producer_guard import PRODUCER_ANSWERS, producer_guard
from api.schemas import FlowAnswer, Problem
from sidecar.flow.engine import FlowEngine
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.signals.change_fanout import ChangeHub

router = APIRouter(tags=["flow"])

_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"model": FlowAnswer,
          "description": "flowStopped, flowStoppedCount, depth, thresholds and their sources"},
    404: {"model": Problem, "description": "the broker does not report this queue"},
    503: {"model": Problem, "description": "the sidecar has not read the broker yet"},
    **PRODUCER_ANSWERS,
}


@dataclass(frozen=True)
class FlowQuery:
    """Long-poll parameters and the producer's identity."""

    wait: float | None
    since: int | None
    producer_id: str | None
    capacity: int
    capacity_bytes: int | None
    scope: Scope = field(repr=False)  # its request's: a graceful stop ends its wait


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
) -> FlowQuery:
    if x_producer_id is not None:  # registering a producer: the guard may refuse it
        producer_guard(request).check(request, x_producer_id)
    return FlowQuery(wait, since, x_producer_id, x_producer_capacity, x_producer_capacity_bytes,
                     request.scope)


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


async def flow_answer(answers: Answers, hub: ChangeHub, vhost: str, queue: str,
                      query: FlowQuery) -> Response:
    """The queue's answer, after waiting for a change when asked to."""
    async def read() -> tuple[QueueEntry, int, list[QueueKey]]:
        entry = known_entry(answers.engine, vhost, queue)
        return entry, entry.version, [entry.key]

    asked_at = time.time()
    with stopping(query.scope) as until:
        entry = await hub.long_poll(read, query.since, query.wait, until=until)
    note_producer(answers, entry, query, asked_at)
    return Response(answers.flow_body(entry), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def note_producer(answers: Answers, entry: QueueEntry, query: FlowQuery,
                  asked_at: float) -> None:
    """Note the asking producer (if it said who it is) on the queue it was answered for."""
    if query.producer_id is not None:
        answers.record_producer(entry, query.producer_id, query.capacity, time.time(),
                                capacity_bytes=query.capacity_bytes, asked_at=asked_at)


@router.get("/flow/{queue}", responses=_ANSWER, response_class=Response)
async def flow_in_default_vhost(queue: QueueDep, query: FlowQueryDep, answers: AnswersDep,
                                hub: HubDep) -> Response:
    """Flow state of a queue in the default vhost `/`."""
    return await flow_answer(answers, hub, "/", queue, query)


@router.get("/flow/{vhost}/{queue}", responses=_ANSWER, response_class=Response)
async def flow_in_vhost(vhost: VhostDep, queue: QueueDep, query: FlowQueryDep,
                        answers: AnswersDep, hub: HubDep) -> Response:
    """Flow state of a queue (vhost `/` is `%2F`)."""
    return await flow_answer(answers, hub, vhost, queue, query)
