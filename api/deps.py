"""Dependencies shared by the routes: the engine, decoded path names, the write token."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request

from api.paths import segment
from sidecar.config import Settings
from sidecar.engine import FlowEngine
from sidecar.hub import ChangeHub
from sidecar.producers import ProducerRegistry


async def get_engine(request: Request) -> FlowEngine:
    engine: FlowEngine = request.app.state.engine
    return engine


async def get_producers(request: Request) -> ProducerRegistry:
    producers: ProducerRegistry = request.app.state.producers
    return producers


async def get_hub(request: Request) -> ChangeHub:
    hub: ChangeHub = request.app.state.hub
    return hub


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


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


EngineDep = Annotated[FlowEngine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ProducersDep = Annotated[ProducerRegistry, Depends(get_producers)]
HubDep = Annotated[ChangeHub, Depends(get_hub)]
VhostDep = Annotated[str, Depends(vhost_name)]
QueueDep = Annotated[str, Depends(queue_name)]
WriteAccess = Depends(require_token)
