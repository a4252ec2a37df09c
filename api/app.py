"""The app factory: builds store, engine, poller and the FastAPI app from one Settings.

No import-time globals: tests make as many apps as they like, each with its own data
directory and broker adapter. The returned ASGI app is FastAPI wrapped in the `/flow`
fast path.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI

from api.fastpath import FastPath
from api.routes import defaults, flow, health, queues
from sidecar.broker import BrokerAdapter
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.config import Settings
from sidecar.engine import FlowEngine
from sidecar.poller import Poller
from sidecar.store import Store


@dataclass
class Sidecar:
    """The parts of a running sidecar, for the server and for tests."""

    settings: Settings
    store: Store
    engine: FlowEngine
    poller: Poller
    api: FastAPI
    asgi: FastPath


def build(settings: Settings, adapter: BrokerAdapter | None = None) -> Sidecar:
    """Wire every part; the poller starts with the app's lifespan."""
    store = Store(settings.data_dir / "flow-sidecar.sqlite3")
    engine = FlowEngine(store, settings.default_policy, stale_after=settings.stale_after,
                        on_stale=settings.on_stale)
    broker = adapter or RabbitMQAdapter(
        settings.management_url, settings.management_user,
        settings.management_password.get_secret_value(), timeout=settings.request_timeout)
    poller = Poller(broker, engine, settings.poll_interval)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(poller.run(), name="poller")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            broker.close()
            store.close()

    app = FastAPI(
        title="flow-sidecar",
        version="0.1.0",
        summary="Apache Qpid producer flow control for RabbitMQ, as a sidecar",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.poller = poller
    for module in (flow, queues, defaults, health):
        app.include_router(module.router)
    return Sidecar(settings, store, engine, poller, app, FastPath(app, engine))


def create_app(settings: Settings, adapter: BrokerAdapter | None = None) -> FastPath:
    """The ASGI application for `settings` (what uvicorn serves)."""
    return build(settings, adapter).asgi
