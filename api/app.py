"""The app factory: builds store, engine, poller and the FastAPI app from one Settings.

No import-time globals: tests make as many apps as they like, each with its own data
directory and broker adapter. The returned ASGI app is FastAPI wrapped in the `/flow`
fast path.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI

from api.fastpath import FastPath
from api.routes import (
    dashboard,
    defaults,
    events,
    exchange_flow,
    flow,
    health,
    metrics,
    queues,
    webhooks,
)
from sidecar.broker import BrokerAdapter
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.config import Settings
from sidecar.engine import FlowEngine
from sidecar.history import HistoryRecorder
from sidecar.hub import ChangeHub
from sidecar.metrics import FlowCollector, metrics_registry
from sidecar.poller import Poller
from sidecar.producers import ProducerRegistry
from sidecar.recent import RecentDepths
from sidecar.store import Store
from sidecar.topology import TopologyCache
from sidecar.webhook_delivery import RetryPolicy, WebhookDelivery
from sidecar.webhook_outbox import WebhookOutbox


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
    hub = ChangeHub()
    engine.listeners.append(hub.on_change)
    engine.version_watchers.append(hub.on_version)
    outbox = WebhookOutbox(store, functools.partial(webhooks.flow_event, engine))
    engine.store_listeners.append(outbox.on_change)
    delivery = WebhookDelivery(
        outbox, timeout=settings.webhook_timeout, concurrency=settings.webhook_concurrency,
        retention=settings.webhook_retention,
        retry=RetryPolicy(settings.webhook_backoff_base, settings.webhook_backoff_max,
                          settings.webhook_give_up_after))
    producers = ProducerRegistry(
        ttl=settings.producer_ttl,
        reaction_seconds=settings.broker_stats_lag + settings.poll_interval)
    poller.on_snapshot.append(lambda _, now: forget_silent_producers(engine, producers, now))
    recorder = HistoryRecorder(
        settings.history_path, interval=settings.history_interval,
        retention_days=settings.history_retention_days, capacity=producers.capacity)
    poller.on_snapshot.append(lambda _, now: recorder.on_poll(engine, now))
    engine.listeners.append(recorder.on_change)
    recent = RecentDepths()  # the dashboard's sparklines
    poller.on_snapshot.append(recent.on_snapshot)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(poller.run(), name="poller")
        deliver = asyncio.create_task(delivery.run(), name="webhooks")
        try:
            yield
        finally:
            task.cancel()
            deliver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(asyncio.CancelledError):
                await deliver
            broker.close()
            recorder.close()
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
    app.state.hub = hub
    app.state.producers = producers
    app.state.webhooks = outbox
    app.state.topology = TopologyCache(broker, max_age=settings.poll_interval)
    app.state.recent = recent
    app.state.metrics = metrics_registry(FlowCollector(engine, poller, webhook_stats=outbox))
    # exchange_flow before flow: its three-segment path must not be read as a queue's
    for module in (exchange_flow, flow, events, queues, defaults, health, webhooks,
                   dashboard, metrics):
        app.include_router(module.router)
    return Sidecar(settings, store, engine, poller, app, FastPath(app, engine, producers))


def forget_silent_producers(engine: FlowEngine, producers: ProducerRegistry,
                            now: float) -> None:
    """Poll hook: drop producers past their ttl; their queues' answers change."""
    for key in producers.sweep(now):
        entry = engine.queues.get(key)
        if entry is not None:
            entry.cached_body = None


def create_app(settings: Settings, adapter: BrokerAdapter | None = None) -> FastPath:
    """The ASGI application for `settings` (what uvicorn serves)."""
    return build(settings, adapter).asgi
