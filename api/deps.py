"""Dependencies shared by the routes: the engine, decoded path names, the write token."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request

from api.paths import segment
from sidecar.config import Settings
from sidecar.engine import FlowEngine
from sidecar.hub import ChangeHub
from sidecar.producers import ProducerRegistry
from sidecar.topology import TopologyCache
from sidecar.webhook_outbox import WebhookOutbox


def app_state(attribute: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that returns one part of the running sidecar from `app.state`."""
    async def get(request: Request) -> Any:
        return getattr(request.app.state, attribute)

    get.__name__ = f"get_{attribute}"
    return get


async def vhost_name(
    vhost: Annotated[str, Path(description="vhost, percent-encoded (`%2F` for `/`)")],
) -> str:
    return segment(vhost, "vhost")


async def queue_name(
    queue: Annotated[str, Path(description="queue name, percent-encoded")],
) -> str:
    return segment(queue, "queue")


async def require_token(request: Request) -> None:
    """Writes need `Authorization: Bearer <token>` when the sidecar has a token."""
    token = request.app.state.settings.token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.get_secret_value().encode()
    ):
        raise HTTPException(
            status_code=401,
            detail="this write needs 'Authorization: Bearer <token>' with the sidecar's token",
            headers={"WWW-Authenticate": "Bearer"},
        )


EngineDep = Annotated[FlowEngine, Depends(app_state("engine"))]
SettingsDep = Annotated[Settings, Depends(app_state("settings"))]
ProducersDep = Annotated[ProducerRegistry, Depends(app_state("producers"))]
HubDep = Annotated[ChangeHub, Depends(app_state("hub"))]
TopologyDep = Annotated[TopologyCache, Depends(app_state("topology"))]
WebhooksDep = Annotated[WebhookOutbox, Depends(app_state("webhooks"))]
VhostDep = Annotated[str, Depends(vhost_name)]
QueueDep = Annotated[str, Depends(queue_name)]
WriteAccess = Depends(require_token)
