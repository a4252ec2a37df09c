"""`GET /flow/...`: what a producer must do now for a queue (the hot path).

Plain GETs of known queues are answered by `api.fastpath` before routing; these routes
serve the rest (unknown queues, not-yet-polled, bad encodings) and document the answer.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from api.deps import EngineDep, QueueDep, VhostDep
from api.views import flow_body

router = APIRouter(tags=["flow"])

_ANSWER = {
    200: {"description": "flowStopped, flowStoppedCount, depth, thresholds and their sources"},
    404: {"description": "the broker does not report this queue"},
    503: {"description": "the sidecar has not read the broker yet"},
}


def flow_answer(engine: EngineDep, vhost: str, queue: str) -> Response:
    """The cached answer for one queue, or the reason there is none."""
    entry = engine.queues.get((vhost, queue))
    if entry is None:
        if not engine.polled_once:
            raise HTTPException(503, "the sidecar has not read the broker yet; retry shortly",
                                headers={"Retry-After": "1"})
        hint = " (settings are stored for it and apply when it appears)" if (
            (vhost, queue) in engine.settings) else ""
        raise HTTPException(404, f"queue {queue!r} in vhost {vhost!r} is not known to the "
                                 f"broker{hint}")
    return Response(flow_body(engine, entry), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


@router.get("/flow/{queue}", responses=_ANSWER)
async def flow_in_default_vhost(queue: QueueDep, engine: EngineDep) -> Response:
    """Flow state of a queue in the default vhost `/`."""
    return flow_answer(engine, "/", queue)


@router.get("/flow/{vhost}/{queue}", responses=_ANSWER)
async def flow_in_vhost(vhost: VhostDep, queue: QueueDep, engine: EngineDep) -> Response:
    """Flow state of a queue (vhost `/` is `%2F`)."""
    return flow_answer(engine, vhost, queue)
