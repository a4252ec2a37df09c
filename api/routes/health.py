"""Liveness and readiness, for systemd, Kubernetes probes and operators."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.deps import EngineDep
from api.views import iso

router = APIRouter(tags=["health"])


def poller_status(request: Request, engine: EngineDep) -> dict[str, Any]:
    """The poller's health in a few fields."""
    poller = request.app.state.poller
    age = None if engine.last_poll_at is None else time.time() - engine.last_poll_at
    return {
        "queues": len(engine.queues),
        "lastPollAt": iso(engine.last_poll_at),
        "lastPollAgeSeconds": None if age is None else round(age, 3),
        "lastPollError": engine.last_poll_error,
        "consecutiveFailures": engine.poll_failures,
        "cycles": poller.cycles,
        "lastCycleSeconds": poller.last_cycle_seconds,
    }


@router.get("/healthz")
async def healthz(request: Request, engine: EngineDep) -> dict[str, Any]:
    """The process serves; the broker may still be unreachable (see /readyz)."""
    return {"status": "ok", "poller": poller_status(request, engine)}


@router.get("/readyz")
async def readyz(request: Request, engine: EngineDep) -> JSONResponse:
    """200 while the broker was read within --stale-after; 503 otherwise."""
    status = poller_status(request, engine)
    age = status["lastPollAgeSeconds"]
    ready = age is not None and age <= engine.stale_after
    return JSONResponse({"ready": ready, "poller": status}, status_code=200 if ready else 503)
