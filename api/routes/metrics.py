"""`/metrics`: Prometheus text exposition of the app's own registry (see sidecar.records.metrics).

A scrape reads the engine on the event loop (the table has no locks). The registry's
families are few; the per-queue series (83,000 samples at 10,000 queues) are written by
`sidecar.records.queue_series` a slice of queues at a time, yielding to the loop between
slices, so a scrape never holds `/flow` up for more than one slice. (Formatting in a worker
thread, as before, did not free the loop: pure Python holds the GIL.)

Always the classic text format 0.0.4, never OpenMetrics: in OpenMetrics the counter
`flow_sidecar_queue_flow_stopped_total` would be the family `flow_sidecar_queue_flow_stopped`
and clash with the gauge of that name, and both names are the ones the spec gives.
Prometheus reads 0.0.4 whatever it asks for first.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from api import compression
from api.deps import EngineDep, MetricsDep, SettingsDep
from sidecar.flow.slices import by_parts
from sidecar.records.queue_series import exported

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response, responses={
    200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}, "description": "Prometheus text"}})
async def metrics(request: Request, registry: MetricsDep, engine: EngineDep,
                  settings: SettingsDep) -> Response:
    """Queue aggregates, poller health, webhook delivery, vhosts and alarms, and per-queue
    flow state, depth and thresholds when `--metrics-per-queue` says so; read from memory
    at scrape time, labels `vhost` and `queue` only; gzip when accepted."""
    text = generate_latest(registry)  # a few dozen samples: the per-queue ones come next
    if exported(settings.metrics_per_queue, engine.queue_count()):
        scrape = request.app.state.queue_series.scrape()
        async for part in by_parts(engine.entries()):
            scrape.add(part)
        text += scrape.text()
    return await compression.answer(request, text, CONTENT_TYPE_PLAIN_0_0_4)
