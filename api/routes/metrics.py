"""`/metrics`: Prometheus text exposition of the app's own registry (see sidecar.records.metrics).

A scrape reads the engine on the event loop (the table has no locks) and formats the text
in a worker thread: with 1,000 queues formatting is about three quarters of the scrape
(bench/metrics_scrape.py) and would otherwise delay every `/flow` answer behind it.

Always the classic text format 0.0.4, never OpenMetrics: in OpenMetrics the counter
`flow_sidecar_queue_flow_stopped_total` would be the family `flow_sidecar_queue_flow_stopped`
and clash with the gauge of that name, and both names are the ones the spec gives.
Prometheus reads 0.0.4 whatever it asks for first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from fastapi import APIRouter, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric

from api.deps import MetricsDep

router = APIRouter(tags=["metrics"])


class Collected:
    """Families already collected, as a Collector `generate_latest` can format anywhere."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> list[Metric]:
        return self.families


@router.get("/metrics", response_class=Response, responses={
    200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}, "description": "Prometheus text"}})
async def metrics(registry: MetricsDep) -> Response:
    """Per-queue flow state, depth and thresholds, poller health, webhook delivery; read
    from memory at scrape time, labels `vhost` and `queue` only."""
    collected = Collected(registry.collect())
    body = await asyncio.to_thread(generate_latest, collected)
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
