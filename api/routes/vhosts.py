"""`/vhosts` and `/alarms`: broker-wide flow control, SPEC section 7.

A vhost's store quota (Broker-J's `storeOverfullSize`/`storeUnderfullSize`, MST-1008/
1009) and its default queue thresholds (Broker-J's virtual-host `capacity`/
`flowResumeCapacity`) are set here; `/alarms` shows RabbitMQ's memory and disk alarms as
last read. Both stop producers through every queue's own `/flow` answer (`flowStoppedBy`).
Writes need the token, are one transaction (503: nothing changed), and are refused for a
vhost the broker does not report (404), which is read from `/api/vhosts` at that moment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request

from api.answers import stop_reasons_json
from api.deps import EngineDep, VhostDep, WriteAccess, runtime_part
from api.lookups import refused, store_failed
from api.request_body import body_schema, json_body
from api.schemas import Problem
from api.vhost_schemas import AlarmsAnswer, VhostDefaultsIn, VhostQuotaIn, VhostView
from sidecar.broker import BrokerAdapter, BrokerError
from sidecar.flow import vhost_settings
from sidecar.flow.engine import FlowEngine, SettingsRejected, StoreUnavailable
from sidecar.flow.thresholds import FLOW_KEYS
from sidecar.flow.vhost_quota import QUOTA_KEYS
from sidecar.signals.event_json import iso

router = APIRouter(tags=["vhosts"])
BrokerDep = Annotated[BrokerAdapter, Depends(runtime_part("broker"))]

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "the sidecar knows nothing of this vhost"}}
_WRITE: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "the sidecar's token is required"},
    404: {"model": Problem, "description": "the broker does not report this vhost"},
    422: {"model": Problem, "description": "refused in Qpid's words, nothing stored"},
    503: {"model": Problem, "description": "the broker's vhosts could not be read, or the "
                                           "settings store could not commit; nothing changed"}}
_DELETE: dict[int | str, dict[str, Any]] = {
    **{k: v for k, v in _WRITE.items() if k in (401, 503)},
    404: {"model": Problem, "description": "nothing of that kind is stored for the vhost"}}


def vhost_view(engine: FlowEngine, vhost: str, queues: int) -> dict[str, Any]:
    """What `/vhosts` shows of one vhost."""
    wide = engine.broker_wide
    state, depth = wide.state(vhost), wide.depth(vhost)
    quota, broker_quota = wide.quota(vhost), wide.broker_quota(vhost)
    defaults = wide.queue_defaults(vhost)
    return {
        "vhost": vhost, "queues": queues,
        "depth": None if depth is None else {"messages": depth.messages, "bytes": depth.bytes},
        "quota": None if quota is None else {k: quota.get(k) for k in QUOTA_KEYS},
        "brokerQuota": None if broker_quota is None else {
            k: broker_quota.get(k) for k in QUOTA_KEYS},
        "quotaSource": wide.quota_source(vhost),
        "storeOverfull": state.stopped, "storeOverfullCount": state.stopped_count,
        "lastTransitionAt": iso(state.since),
        "queueDefaults": None if defaults is None else {k: defaults.get(k) for k in FLOW_KEYS},
        **stop_reasons_json(wide.reasons(vhost)),
    }


def one_vhost(engine: FlowEngine, vhost: str) -> dict[str, Any]:
    """`vhost_view` with its queue count."""
    return vhost_view(engine, vhost, engine.vhost_queue_counts()[vhost])


async def require_vhost(broker: BrokerAdapter, vhost: str) -> None:
    """404 unless the broker reports `vhost` now; 503 when it cannot be asked."""
    try:
        names = await asyncio.to_thread(broker.fetch_vhosts)
    except BrokerError as exc:
        raise HTTPException(503, f"cannot read the broker's vhosts to check {vhost!r}: "
                                 f"{exc}; nothing was changed, retry",
                            headers={"Retry-After": "1"}) from None
    if vhost not in names:
        raise HTTPException(404, f"vhost {vhost!r} is not known to the broker")


@router.get("/vhosts", response_model=list[VhostView])
async def list_vhosts(engine: EngineDep) -> list[dict[str, Any]]:
    """Every vhost with queues, a quota, defaults or a quota history."""
    counts = engine.vhost_queue_counts()
    return [vhost_view(engine, v, counts[v]) for v in sorted(engine.broker_wide.vhosts())]


@router.get("/vhosts/{vhost}", response_model=VhostView, responses=_NOT_FOUND)
async def get_vhost(vhost: VhostDep, engine: EngineDep) -> dict[str, Any]:
    """One vhost's total, quota, quota state and default queue thresholds."""
    if vhost not in engine.broker_wide.vhosts():
        raise HTTPException(404, f"vhost {vhost!r} has no queues, quota or defaults here")
    return one_vhost(engine, vhost)


@router.put("/vhosts/{vhost}/quota", dependencies=[WriteAccess], response_model=VhostView,
            openapi_extra=body_schema(VhostQuotaIn), responses=_WRITE)
async def put_quota(vhost: VhostDep, request: Request, engine: EngineDep,
                    broker: BrokerDep) -> Any:
    """Replace the vhost's store quota; it applies at once to the vhost's last total."""
    body = await json_body(request, VhostQuotaIn)
    return await _put(engine, broker, vhost, body.values(), vhost_settings.put_quota)


@router.put("/vhosts/{vhost}/defaults", dependencies=[WriteAccess], response_model=VhostView,
            openapi_extra=body_schema(VhostDefaultsIn), responses=_WRITE)
async def put_defaults(vhost: VhostDep, request: Request, engine: EngineDep,
                       broker: BrokerDep) -> Any:
    """Replace the default qpid.flow_* thresholds of the vhost's queues."""
    body = await json_body(request, VhostDefaultsIn)
    return await _put(engine, broker, vhost, body.values(), vhost_settings.put_queue_defaults)


@router.delete("/vhosts/{vhost}/quota", dependencies=[WriteAccess], response_model=VhostView,
               responses=_DELETE)
async def delete_quota(vhost: VhostDep, engine: EngineDep) -> Any:
    """Forget the vhost's quota; an overfull vhost resumes (MST-1009)."""
    return _delete(engine, vhost_settings.QUOTA, vhost)


@router.delete("/vhosts/{vhost}/defaults", dependencies=[WriteAccess],
               response_model=VhostView, responses=_DELETE)
async def delete_defaults(vhost: VhostDep, engine: EngineDep) -> Any:
    """Forget the vhost's default queue thresholds."""
    return _delete(engine, vhost_settings.DEFAULTS, vhost)


@router.get("/alarms", response_model=AlarmsAnswer)
async def alarms(engine: EngineDep) -> dict[str, Any]:
    """RabbitMQ's memory and disk alarms in force: each stops every queue's producers."""
    wide = engine.broker_wide
    return {"alarms": [{"node": a.node, "resource": str(a.resource), "since": iso(since)}
                       for a, since in wide.alarms()],
            "readAt": iso(wide.alarms_read_at), "lastError": wide.alarm_error}


Write = Callable[[FlowEngine, str, Mapping[str, float], float], None]


async def _put(engine: FlowEngine, broker: BrokerAdapter, vhost: str,
               values: Mapping[str, float], write: Write) -> Any:
    """Store a vhost's values if the broker reports the vhost: its view, or the
    404/422/503 that says why not."""
    await require_vhost(broker, vhost)
    try:
        write(engine, vhost, values, time.time())
    except SettingsRejected as exc:
        return refused([(p.key, p.message) for p in exc.problems])
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    return one_vhost(engine, vhost)


def _delete(engine: FlowEngine, kind: str, vhost: str) -> Any:
    """Forget a vhost's quota or defaults: the vhost's view, or 404/503."""
    try:
        deleted = vhost_settings.delete(engine, kind, vhost, time.time())
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    if not deleted:
        raise HTTPException(404, f"no {kind} is stored for vhost {vhost!r}")
    return one_vhost(engine, vhost)
