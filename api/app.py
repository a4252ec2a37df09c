"""The API builder: a FastAPI app (wrapped in the `/flow` fast path, behind the request
guards of `api.guards`) over a built Runtime.

It mounts one router per resource and keeps, in `app.state`, the runtime and the answer
builder the routes depend on (see `api.deps`). The lifespan runs the runtime's background
work (polling, webhook delivery) and closes the settings store at the end. No import-time
globals: tests make as many apps as they like.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI

from api.answers import Answers
from api.edge.direct_writes import DirectSwitch
from api.edge.fast_path import FastPath
from api.edge.parked_polls import ParkedPolls
from api.edge.stream_writes import StreamWrites
from api.error_answers import install_error_answers
from api.guards import Guards, document_guards
from api.name_filter_worker import NameFilterWorker
from api.producer_guard import ProducerGuard
from api.routes import (
    dashboard,
    defaults,
    events,
    exchange_flow,
    flow,
    grants,
    health,
    metrics,
    producers,
    queues,
    vhosts,
    webhooks,
)
from sidecar.records.queue_series import QueueSeries
from sidecar.runtime import Runtime


def build_api(runtime: Runtime, *, on_shutdown: Callable[[], None] | None = None) -> Guards:
    """The ASGI app serving `runtime`; `on_shutdown` runs once its background work ended
    (the composition root closes the settings store there)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(runtime.run(), name="sidecar")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await name_filters.close()
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(
        title="flow-sidecar",
        version="0.1.0",
        summary="Apache Qpid producer flow control for RabbitMQ, as a sidecar",
        lifespan=lifespan,
        redirect_slashes=False,  # its redirects echo the Host header into Location
    )
    answers = Answers(runtime.engine, runtime.producers, reports=runtime.reports)
    app.state.runtime = runtime
    app.state.settings = runtime.settings
    app.state.answers = answers
    # /metrics' per-queue labels, kept between scrapes
    app.state.queue_series = QueueSeries(answers.offers.offered)
    name_filters = app.state.name_filters = NameFilterWorker()
    settings = runtime.settings
    guard = app.state.producer_guard = ProducerGuard(
        settings.producer_token, settings.token, settings.max_producers_per_client,
        settings.producer_ttl)
    # exchange_flow before flow: its three-segment path must not be read as a queue's
    for module in (exchange_flow, flow, events, queues, defaults, health, webhooks,
                   dashboard, metrics, vhosts, producers, grants):
        app.include_router(module.router)
    install_error_answers(app)
    document_guards(app)
    switch = app.state.direct_switch = DirectSwitch(settings.direct_writes == "on")
    parked = app.state.parked_polls = ParkedPolls(answers, switch)
    app.state.stream_writes = StreamWrites(runtime.hub, switch)
    runtime.engine.version_watchers.append(parked.on_version)
    return Guards(FastPath(app, answers, guard, runtime.hub, parked, switch), runtime.settings)
