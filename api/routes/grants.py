"""`/grants`: credit grants, a hard bound on depth for producers that ask before sending.

`POST /grants/{vhost}/{queue}` and `POST /grants/exchange/{vhost}/{exchange}?routing_key=K`
grant up to the asked messages and bytes that every destination can take on top of its
depth and the credit already out (see `sidecar.signals.grants`); `POST /grants/release`
ends grants early, saying what was used, and only the producer that asked may. Grants
need no `--token`, like `/flow`: they are the producers' side of flow control, not a
setting; `--producer-token` and `--max-producers-per-client` guard them
(`api.producer_guard`). The ledger lives in memory; each grant and release is also
recorded in SQLite (`sidecar.signals.grant_record`).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from api.deps import AnswersDep, GrantsDep, OwnersDep, QueueDep, TopologyDep, VhostDep
from api.edge.protocol import MAX_PRODUCER_ID
from api.grant_forwarding import forward, forwarded
from api.grant_schemas import (
    GrantIn,
    GrantOut,
    GrantReleaseIn,
    QueueGrantsOut,
    ReleaseIn,
    ReleaseOut,
)
from api.lookups import (
    ProducerPublished,
    known_entry,
    note_report,
    require_polled,
    routed_queues,
)
from api.path_segments import segment
from api.producer_guard import PRODUCER_ANSWERS, producer_guard
from api.request_body import body_schema, json_body
from api.schemas import Problem
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.signals.event_json import iso
from sidecar.signals.grant_desk import GrantDesk, Release

router = APIRouter(tags=["grants"])

_ASK: dict[int | str, dict[str, Any]] = {
    200: {"description": "what may be sent, possibly nothing (`grantId` null, `limitedBy` "
                         "says why)"},
    403: {"model": Problem, "description": "a release in the request ends another "
                                           "producer's grant; nothing was applied"},
    404: {"model": Problem, "description": "the broker does not report this queue or "
                                           "exchange"},
    422: {"model": Problem, "description": "a bad request; nothing was granted or released"},
    503: {"model": Problem, "description": "the sidecar has not read the broker yet"},
    **PRODUCER_ANSWERS,
}

ProducerId = Annotated[str | None, Header(min_length=1, max_length=MAX_PRODUCER_ID,
                                          description="who is asking (fair shares are per "
                                                      "producer)")]


def owner(request: Request, owners: GrantOwnership | None, vhost: str) -> str | None:
    """The URL of the replica that answers this request for `vhost`, None: this one."""
    return None if owners is None or forwarded(request) else owners.route(vhost)


def nothing_granted(vhost: str, queues: set[str]) -> dict[str, Any]:
    """An answer granting nothing (`limitedBy` to be said)."""
    return {"grantId": None, "messages": 0, "bytes": None, "leaseSeconds": 0.0,
            "expiresAt": None, "vhost": vhost, "destinations": sorted(queues),
            "limitedBy": None, "notHeld": []}


def releases(items: list[GrantReleaseIn]) -> list[Release]:
    return [Release(r.grant_id, r.used_messages, r.used_bytes, r.confirmed) for r in items]


def check_releases(desk: GrantDesk, items: list[Release], where: tuple[str, ...],
                   producer: str | None) -> None:
    """422 naming the field when a release claims more than its grant had, 403 when it
    ends another producer's grant (its later release would find nothing and its use be
    lost); before anything is applied, so a refused request changes nothing."""
    problems = desk.problems(items)
    if problems:
        raise RequestValidationError([
            {"loc": ("body", *where, i, field), "msg": message, "type": "value_error"}
            for i, field, message in problems])
    foreign = desk.foreign(items, producer)
    if foreign is not None:
        raise HTTPException(403, foreign)


async def answer(desk: GrantDesk, producer: str | None, body: GrantIn, vhost: str,
                 queues: set[str]) -> dict[str, Any]:
    """Release what the request gives back, then grant (waiting up to `body.wait`); a
    request refused for its releases or its missing bytes changes nothing."""
    keys = [(vhost, q) for q in queues]
    given_back = releases(body.release)
    check_releases(desk, given_back, ("release",), producer)
    problem = desk.bytes_problem(keys, body.bytes)
    if problem is not None:
        raise RequestValidationError([{"loc": ("body", "bytes"), "msg": problem,
                                       "type": "missing"}])
    not_held = desk.release(given_back)
    decision = await desk.ask_waiting(producer, keys, body.messages, body.bytes, body.lease,
                                      body.wait)
    made = decision.grant
    return {
        "grantId": made.id if made else None,
        "messages": decision.messages,
        "bytes": decision.bytes,
        "leaseSeconds": desk.lease_for(body.lease) if made else 0.0,
        "expiresAt": iso(made.expires_at) if made else None,
        "vhost": vhost,
        "destinations": sorted(queues),
        "limitedBy": decision.limited_by,
        "notHeld": not_held,
    }


@router.post("/grants/release", response_model=ReleaseOut,
             openapi_extra=body_schema(ReleaseIn),
             responses={422: {"model": Problem, "description": "refused; nothing released"},
                        **PRODUCER_ANSWERS,
                        403: {"model": Problem, "description": "a grant of another "
                                                               "producer; nothing released"}})
async def release_grants(request: Request, desk: GrantsDep, owners: OwnersDep,
                         x_producer_id: ProducerId = None) -> dict[str, Any] | Response:
    """End grants: the used part stays counted until depth shows it, the rest returns now.
    Only the producer that asked for a grant may end it."""
    producer_guard(request).check(request, x_producer_id)
    body = await json_body(request, ReleaseIn)
    maker = None if owners is None or forwarded(request) else owners.url_of(
        body.grants[0].grant_id.split(".", 1)[0])
    if maker is not None:  # made by another replica: released there
        return await forward(request, maker, await request.body(), None)
    given_back = releases(body.grants)
    check_releases(desk, given_back, ("grants",), x_producer_id)
    not_held = desk.release(given_back)
    return {"released": len(given_back) - len(not_held), "notHeld": not_held}


@router.post("/grants/exchange/{vhost}/{exchange}", response_model=GrantOut,
             openapi_extra=body_schema(GrantIn), responses=_ASK)
async def grant_for_exchange(
    request: Request, vhost: VhostDep, exchange: str, desk: GrantsDep, answers: AnswersDep,
    topology: TopologyDep, owners: OwnersDep, x_producer_id: ProducerId = None,
    routing_key: Annotated[str, Query(max_length=255, description="the routing key")] = "",
    x_producer_published: ProducerPublished = None,  # type: ignore[assignment]
) -> dict[str, Any] | Response:
    """Credit for publishing to `exchange` with `routing_key`: every queue it reaches."""
    producer_guard(request).check(request, x_producer_id)
    body = await json_body(request, GrantIn)
    name = segment(exchange, "exchange")
    require_polled(answers.engine)
    if (url := owner(request, owners, vhost)) is not None:
        return await forward(request, url, await request.body(), nothing_granted(vhost, set()))
    queues = await routed_queues(topology, vhost, name, routing_key)
    for queue in queues:  # what reached the exchange reached each of them
        note_report(answers, (vhost, queue), x_producer_id, x_producer_published, time.time())
    return await answer(desk, x_producer_id, body, vhost, queues)


@router.post("/grants/{vhost}/{queue}", response_model=GrantOut,
             openapi_extra=body_schema(GrantIn), responses=_ASK)
async def grant_for_queue(request: Request, vhost: VhostDep, queue: QueueDep,
                          desk: GrantsDep, answers: AnswersDep, owners: OwnersDep,
                          x_producer_id: ProducerId = None,
                          x_producer_published: ProducerPublished = None,  # type: ignore[assignment]
                          ) -> dict[str, Any] | Response:
    """Credit for publishing to a queue (vhost `/` is `%2F`)."""
    producer_guard(request).check(request, x_producer_id)
    body = await json_body(request, GrantIn)
    entry = known_entry(answers.engine, vhost, queue)
    note_report(answers, entry.key, x_producer_id, x_producer_published, time.time())
    if (url := owner(request, owners, vhost)) is not None:
        return await forward(request, url, await request.body(),
                             nothing_granted(vhost, {queue}))
    return await answer(desk, x_producer_id, body, vhost, {queue})


@router.get("/grants/{vhost}/{queue}", response_model=QueueGrantsOut,
            responses={404: {"model": Problem, "description": "the broker does not report "
                                                             "this queue"},
                       503: {"model": Problem, "description": "the broker is not read yet"}})
async def queue_grants(request: Request, vhost: VhostDep, queue: QueueDep, desk: GrantsDep,
                       answers: AnswersDep, owners: OwnersDep) -> dict[str, Any] | Response:
    """What the queue's credit ledger holds: grants, credit not yet in depth, what is free
    (with replicas: the owner's ledger)."""
    entry = known_entry(answers.engine, vhost, queue)
    if (url := owner(request, owners, vhost)) is not None:
        return await forward(request, url, b"", None)
    depth = entry.depth
    return {"vhost": vhost, "queue": queue, "flowStopped": entry.told_stopped,
            "depth": None if depth is None else {"messages": depth.messages,
                                                 "bytes": depth.bytes},
            **desk.view((vhost, queue))}
