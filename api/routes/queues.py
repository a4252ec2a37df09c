"""`/queues`: every queue's flow view, and its stored qpid.flow_* settings."""

from __future__ import annotations

import time
from fnmatch import fnmatchcase
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from api.body import body_schema, json_body
from api.deps import EngineDep, ProducersDep, QueueDep, VhostDep, WriteAccess
from api.schemas import FlowSettingsIn
from api.views import full_view, producer_list
from sidecar.engine import SettingsRejected

router = APIRouter(tags=["queues"])


@router.get("/queues")
async def list_queues(
    engine: EngineDep, producers: ProducersDep, vhost: str | None = None,
    name: str | None = None
) -> list[dict[str, Any]]:
    """All queues the broker reports plus those with settings waiting; filter by vhost and
    by a name glob (`orders.*`)."""
    keys = set(engine.queues) | set(engine.settings)
    out = []
    for key in sorted(keys):
        if (vhost is None or key[0] == vhost) and (name is None or fnmatchcase(key[1], name)):
            view = full_view(engine, key, producers)
            if view is not None:
                out.append(view)
    return out


@router.get("/queues/{vhost}/{queue}")
async def get_queue(vhost: VhostDep, queue: QueueDep, engine: EngineDep,
                    producers: ProducersDep) -> dict[str, Any]:
    """One queue's flow view and stored settings, with each active producer."""
    view = full_view(engine, (vhost, queue), producers)
    if view is None:
        raise HTTPException(404, f"queue {queue!r} in vhost {vhost!r} is not known to the "
                                 "broker and has no stored settings")
    view["activeProducers"] = producer_list(producers, (vhost, queue))
    return view


@router.put("/queues/{vhost}/{queue}/flow", dependencies=[WriteAccess],
            openapi_extra=body_schema(FlowSettingsIn))
async def put_flow_settings(
    vhost: VhostDep, queue: QueueDep, request: Request, engine: EngineDep,
    producers: ProducersDep
) -> Any:
    """Replace the queue's qpid.flow_* settings (the queue need not exist yet)."""
    body = await json_body(request, FlowSettingsIn)
    try:
        engine.put_settings((vhost, queue), body.values(), time.time())
    except SettingsRejected as exc:
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": ["body", p.key], "msg": p.message, "type": "value_error"}
            for p in exc.problems]})
    return full_view(engine, (vhost, queue), producers)


@router.delete("/queues/{vhost}/{queue}/flow", dependencies=[WriteAccess])
async def delete_flow_settings(vhost: VhostDep, queue: QueueDep, engine: EngineDep,
                               producers: ProducersDep) -> Any:
    """Forget the queue's stored settings; its declare arguments or defaults apply again."""
    if not engine.delete_settings((vhost, queue), time.time()):
        raise HTTPException(404, f"no settings are stored for queue {queue!r} in vhost "
                                 f"{vhost!r}")
    return full_view(engine, (vhost, queue), producers) or {"vhost": vhost, "queue": queue,
                                                 "exists": False, "settings": None}
