"""Liveness and readiness, for systemd, Kubernetes probes and operators."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.types import Scope

from api.deps import EngineDep, LiveDep, PollerDep
from api.edge.direct_writes import link_of
from api.edge.parked_polls import ParkedPolls
from api.edge.stream_writes import StreamWrites
from api.edge.wake_steps import WakeUp
from api.health_schemas import HealthAnswer, ReadyAnswer
from api.lookups import defaults_view
from sidecar.broker import ChecksFigures
from sidecar.broker.rabbitmq_prometheus import RabbitMQDepthSources
from sidecar.flow.engine import FlowEngine
from sidecar.flow.live_sampler import LiveSampler
from sidecar.flow.poller import Poller
from sidecar.signals.event_json import iso

router = APIRouter(tags=["health"])


def poller_status(engine: FlowEngine, poller: Poller) -> dict[str, Any]:
    """The poller's health in a few fields."""
    age = None if engine.last_poll_at is None else time.time() - engine.last_poll_at
    figures = poller.adapter.figures if isinstance(poller.adapter, ChecksFigures) else None
    return {
        "queues": engine.queue_count(),
        "lastPollAt": iso(engine.last_poll_at),
        "lastPollAgeSeconds": None if age is None else round(age, 3),
        "lastPollError": engine.last_poll_error,
        "consecutiveFailures": engine.poll_failures,
        "cycles": poller.cycles,
        "lastCycleSeconds": poller.last_cycle_seconds,
        "refusedFigures": figures.refused if figures else 0,
        "lastRefusedFigure": figures.last_refused if figures else None,
    }


def live_status(live: LiveSampler | None) -> dict[str, Any]:
    """Live depth in a few fields; `connected` false means statistics only."""
    if live is None:
        return {"enabled": False, "connected": False, "lastError": None, "hotQueues": 0,
                "watchedQueues": 0, "fullPassSeconds": None, "hotReadGapSeconds": None,
                "budget": None, "idleBudget": None, "samples": 0, "errors": 0,
                "lastSampleAt": None}
    return {"enabled": True, "connected": bool(live.connected), "lastError": live.last_error,
            "hotQueues": live.hot, "watchedQueues": live.watched,
            "fullPassSeconds": live.full_pass_seconds,
            "hotReadGapSeconds": live.hot_gap.last, "budget": live.budget,
            "idleBudget": live.idle_budget, "samples": live.samples,
            "errors": live.errors, "lastSampleAt": iso(live.last_sample_at)}


def lag_status(engine: FlowEngine) -> dict[str, Any]:
    """How far the broker's statistics lag: the option, the measurement, the one in use."""
    measured = engine.lag_meter.measured()
    return {"configured": engine.configured_lag,
            "measured": None if measured is None else round(measured, 3),
            "effective": round(engine.statistics_lag, 3)}


def wakeup_status(parked: ParkedPolls, writes: StreamWrites, scope: Scope) -> dict[str, Any]:
    """The last wake-ups, and how they are written: directly only when the switch is on
    and this very request came through the server the direct path knows."""
    switch = parked.switch

    def last(wakeup: WakeUp | None) -> dict[str, Any] | None:
        return None if wakeup is None else {
            "connections": wakeup.connections, "seconds": round(wakeup.seconds, 6),
            "cpuSeconds": round(wakeup.cpu_seconds, 6)}

    direct = switch.on and link_of(scope) is not None
    return {"writes": "direct" if direct else "send", "directFailure": switch.failure,
            "longPollsWaiting": parked.waiting, "longPolls": last(parked.last_wakeup),
            "longPollsEnded": last(parked.last_ended),
            "streams": last(writes.last_wakeup)}


@router.get("/healthz", response_model=HealthAnswer)
async def healthz(request: Request, engine: EngineDep, poller: PollerDep,
                  live: LiveDep) -> dict[str, Any]:
    """The process serves; the broker may still be unreachable (see /readyz). Degraded
    while the broker answers without the data flow control needs (`problems` says what)."""
    problems = [p.text for p in poller.gaps.problems(time.time())]
    source = poller.adapter
    return {"status": "degraded" if problems else "ok", "problems": problems,
            "depthSource": source.status() if isinstance(source, RabbitMQDepthSources)
            else None,
            "poller": poller_status(engine, poller),
            "defaults": defaults_view(engine), "live": live_status(live),
            "statisticsLag": lag_status(engine),
            "wakeups": wakeup_status(request.app.state.parked_polls,
                                     request.app.state.stream_writes, request.scope)}


@router.get("/readyz", response_model=ReadyAnswer, responses={
    503: {"model": ReadyAnswer, "description": "the broker was not read within "
                                               "--stale-after"}})
async def readyz(engine: EngineDep, poller: PollerDep) -> JSONResponse:
    """200 while the broker was read within --stale-after; 503 otherwise."""
    status = poller_status(engine, poller)
    age = status["lastPollAgeSeconds"]
    ready = age is not None and age <= engine.stale_after
    return JSONResponse({"ready": ready, "poller": status}, status_code=200 if ready else 503)
