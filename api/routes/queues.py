"""`/queues`: every queue's flow view, and its stored qpid.flow_* settings."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from api import compression
from api.answers import producer_list
from api.broker_declare import DeclareRefused, declare_with_thresholds
from api.deps import (
    SELECTION_REFUSED,
    AnswersDep,
    FilledDep,
    QueueDep,
    SelectedDep,
    VhostDep,
    WriteAccess,
    WritesDep,
)
from api.lookups import refused, store_failed
from api.queue_selection import paged
from api.request_body import body_schema, json_body
from api.schemas import FlowSettingsIn, Problem, QueuePage, QueueView
from sidecar.flow.engine import SettingsRejected, StoreUnavailable
from sidecar.flow.fill_rate import WARNING_KEYS, warning_problems
from sidecar.flow.producer_classes import class_problems
from sidecar.flow.slices import map_by_parts

router = APIRouter(tags=["queues"])
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "neither the broker nor the settings store knows "
                                           "the queue"}}
_WRITE: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "the sidecar's token is required"},
    409: {"model": Problem, "description": "the broker fixes thresholds at declare "
                                           "time and the queue exists (Qpid C++)"},
    422: {"model": Problem, "description": "refused settings, nothing stored"},
    503: {"model": Problem, "description": "the settings store could not commit; "
                                           "nothing changed"}}


_LISTING: dict[int | str, dict[str, Any]] = {
    200: {"model": list[QueueView] | QueuePage, "description": (
        "without `page`, the list of every selected queue; with it, RabbitMQ's paged "
        "object around one page")},
    **SELECTION_REFUSED}


@router.get("/queues", response_model=list[QueueView] | QueuePage,
            response_model_exclude_unset=True, responses=_LISTING)
async def list_queues(request: Request, answers: AnswersDep,
                      selected: SelectedDep) -> Response:
    """All queues the broker reports plus those with settings waiting, filtered, sorted and
    paged server-side with RabbitMQ's parameters (`page`, `page_size`, `name`,
    `use_regex`; `sort=stopped` puts flow-stopped queues first); gzip when accepted."""
    # Not validated against QueueView at run time (the fuzzer checks the shape): with
    # 10,000 queues validation tripled the time a listing held the loop. Built a slice at
    # a time from the cached /flow bodies, so /flow is answered in between.
    bodies = await map_by_parts([row.key for row in selected.rows], answers.full_view_body)
    items = b"[" + b",".join(bodies) + b"]"
    if selected.selection.page is not None:
        meta = json.dumps(paged(selected.selection, len(bodies), selected.filtered,
                                selected.total),
                          separators=(",", ":"))
        items = b'{"items":%s,%s' % (items, meta[1:].encode())
    return await compression.answer(request, items, "application/json")


@router.get("/queues/{vhost}/{queue}", response_model=QueueView,
            response_model_exclude_unset=True, responses=_NOT_FOUND)
async def get_queue(vhost: VhostDep, queue: QueueDep, answers: AnswersDep,
                    filled: FilledDep) -> dict[str, Any]:
    """One queue's flow view and stored settings, with each active producer and who filled
    it before its last stop."""
    view = answers.full_view((vhost, queue))
    if view is None:
        raise HTTPException(404, f"queue {queue!r} in vhost {vhost!r} is not known to the "
                                 "broker and has no stored settings")
    view["activeProducers"] = producer_list(answers.producers, (vhost, queue))
    view["topProducers"] = filled.top_json((vhost, queue))
    return view


@router.put("/queues/{vhost}/{queue}/flow", dependencies=[WriteAccess],
            openapi_extra=body_schema(FlowSettingsIn), response_model=QueueView,
            response_model_exclude_unset=True, responses=_WRITE)
async def put_flow_settings(
    vhost: VhostDep, queue: QueueDep, request: Request, answers: AnswersDep, writes: WritesDep
) -> Any:
    """Replace the queue's qpid.flow_* settings (the queue need not exist yet); on a broker
    that fixes them at declare time (Qpid C++), declare the queue with them."""
    body = await json_body(request, FlowSettingsIn)
    runtime, values, classes = request.app.state.runtime, body.values(), body.classes()
    try:
        if runtime.declarer is not None:  # the thresholds go to the broker; warnings and
            # classes, which the sidecar applies to the broker's thresholds, are kept here
            warnings = {k: v for k, v in values.items() if k in WARNING_KEYS}
            if problems := warning_problems(warnings) + class_problems(classes):
                raise SettingsRejected(problems)
            await declare_with_thresholds(runtime, runtime.declarer, (vhost, queue), values)
            if warnings or classes is not None:
                await writes.put_settings((vhost, queue), warnings, time.time(), classes)
        else:
            await writes.put_settings((vhost, queue), values, time.time(), classes)
    except DeclareRefused as exc:
        return refused([(exc.key, exc.message)])
    except SettingsRejected as exc:
        return refused([(p.key, p.message) for p in exc.problems])
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    # declared on the broker but not listed yet (the poll after it failed): it will show
    return answers.full_view((vhost, queue)) or {"vhost": vhost, "queue": queue,
                                                 "exists": False}


@router.delete("/queues/{vhost}/{queue}/flow", dependencies=[WriteAccess],
               response_model=QueueView, response_model_exclude_unset=True,
               responses={**_NOT_FOUND, **_WRITE})
async def delete_flow_settings(vhost: VhostDep, queue: QueueDep, answers: AnswersDep,
                               writes: WritesDep) -> Any:
    """Forget the queue's stored settings; its declare arguments or defaults apply again."""
    try:
        deleted = await writes.delete_settings((vhost, queue), time.time())
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    if not deleted:
        raise HTTPException(404, f"no settings are stored for queue {queue!r} in vhost "
                                 f"{vhost!r}")
    return answers.full_view((vhost, queue)) or {"vhost": vhost, "queue": queue,
                                                 "exists": False, "settings": None}
