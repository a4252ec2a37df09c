"""`/producers`: a producer that is done says so, instead of lingering for `--producer-ttl`.

`FlowControlledPublisher.close()` calls `DELETE /producers/{producer_id}`: the producer is
forgotten on every queue at once, so its window leaves `overflowRisk` now, and a long-poll
it left parked cannot bring it back or log a CHN line for it when it answers. No `--token`
is needed, as none is needed to register (any flow request with `X-Producer-Id` does that):
the registry is advice for operators, not a setting; `--producer-token` guards both
(`api.producer_guard`).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from api.deps import ProducersDep
from api.path_segments import segment
from api.producer_guard import PRODUCER_ANSWERS, producer_guard
from api.schemas import Problem, ProducerLeft

router = APIRouter(tags=["producers"])


@router.delete("/producers/{producer_id}", response_model=ProducerLeft, responses={
    400: {"model": Problem, "description": "the id is not percent-encoded UTF-8"},
    401: PRODUCER_ANSWERS[401]})
async def leave(
    request: Request,
    producer_id: Annotated[str, Path(description="the producer's X-Producer-Id, "
                                     "percent-encoded")],
    producers: ProducersDep,
) -> dict[str, Any]:
    """Forget a producer on every queue (idempotent: an unknown id left nothing)."""
    name = segment(producer_id, "producer")
    producer_guard(request).check(request, name, counts=False)
    gone = producers.leave(name, time.time())
    return {"producer": name, "queues": [{"vhost": v, "queue": q} for v, q in sorted(gone)]}
