"""`/defaults`: qpidd's broker-wide default thresholds, changeable without a restart.

Defaults set here are stored and win over the start-up options (`--default-flow-*`,
`--default-queue-limit`), also after a restart, until `DELETE /defaults`: an operator's
runtime decision is not undone by a redeploy that keeps the old flags. Every answer shows
both, and the sidecar logs a WARNING at start-up while stored defaults override different
options."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from api.deps import EngineDep, WriteAccess, WritesDep
from api.lookups import defaults_view, store_failed
from api.request_body import body_schema, json_body
from api.schemas import DefaultsIn, DefaultsOut, Problem
from sidecar.flow.engine import StoreUnavailable

router = APIRouter(tags=["defaults"])


_WRITE: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "the sidecar's token is required"},
    503: {"model": Problem, "description": "the settings store could not commit"}}


@router.get("/defaults", response_model=DefaultsOut)
async def get_defaults(engine: EngineDep) -> dict[str, Any]:
    """The default flow percentages and queue limit in effect, and the start-up options."""
    return defaults_view(engine)


@router.put("/defaults", dependencies=[WriteAccess], openapi_extra=body_schema(DefaultsIn),
            response_model=DefaultsOut, responses={
                **_WRITE, 422: {"model": Problem, "description": "refused, nothing stored"}})
async def put_defaults(request: Request, engine: EngineDep, writes: WritesDep
                       ) -> dict[str, Any]:
    """Change the defaults; every queue using them is re-evaluated at once."""
    body = await json_body(request, DefaultsIn)
    policy = body.policy()
    problems = policy.problems()
    if problems:
        raise HTTPException(422, detail=[{"loc": ["body"], "msg": p, "type": "value_error"}
                                         for p in problems])
    try:
        await writes.set_defaults(policy, time.time())
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    return defaults_view(engine)


@router.delete("/defaults", dependencies=[WriteAccess], response_model=DefaultsOut,
               responses=_WRITE)
async def reset_defaults(engine: EngineDep, writes: WritesDep) -> dict[str, Any]:
    """Go back to the start-up options (flags / FLOW_* variables)."""
    try:
        await writes.set_defaults(None, time.time())
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    return defaults_view(engine)
