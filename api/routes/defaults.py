"""`/defaults`: qpidd's broker-wide default thresholds, changeable without a restart."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from api.body import body_schema, json_body
from api.deps import EngineDep, WriteAccess
from api.schemas import DefaultsIn, defaults_json

router = APIRouter(tags=["defaults"])


@router.get("/defaults")
async def get_defaults(engine: EngineDep) -> dict[str, Any]:
    """The default flow percentages and queue limit in effect."""
    return defaults_json(engine.defaults, from_startup=engine.defaults == engine.startup_defaults)


@router.put("/defaults", dependencies=[WriteAccess], openapi_extra=body_schema(DefaultsIn))
async def put_defaults(request: Request, engine: EngineDep) -> dict[str, Any]:
    """Change the defaults; every queue using them is re-evaluated at once."""
    body = await json_body(request, DefaultsIn)
    policy = body.policy()
    problems = policy.problems()
    if problems:
        raise HTTPException(422, detail=[{"loc": ["body"], "msg": p, "type": "value_error"}
                                         for p in problems])
    engine.set_defaults(policy, time.time())
    return defaults_json(engine.defaults, from_startup=False)


@router.delete("/defaults", dependencies=[WriteAccess])
async def reset_defaults(engine: EngineDep) -> dict[str, Any]:
    """Go back to the start-up options (flags / FLOW_* variables)."""
    engine.set_defaults(None, time.time())
    return defaults_json(engine.defaults, from_startup=True)
