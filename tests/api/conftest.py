"""The in-process API layer: the real app factory over a scripted broker, called through
httpx's ASGI transport. No RabbitMQ, no sockets, no background tasks: a test decides when
the poller reads the broker (`await api.poll()`), so these tests are fast and exact. What
needs a real broker stays in tests/integration."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.main import Sidecar, build
from sidecar.broker import BrokerError, LiveDepthSource
from sidecar.config import Settings
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueInfo
from sidecar.signals.exchange_routing import Topology


class ScriptedBroker:
    """A broker adapter that answers what the test put in it (or fails when told to)."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], QueueInfo] = {}
        self.topology = Topology()
        self.failure: str | None = None
        self.nodes: dict[str, NodeStatus] = {"rabbit@test": NodeStatus(False, False)}
        self.nodes_failure: str | None = None  # only the alarm read fails
        self.vhosts: set[str] = {"/"}

    def queue(self, name: str, messages: int | None = 0, nbytes: int | None = 0, *,
              vhost: str = "/", **kw: Any) -> QueueInfo:
        """Report (or re-report with a new depth) one queue."""
        info = QueueInfo(vhost, name, messages, nbytes, **kw)
        self.queues[(vhost, name)] = info
        return info

    def fetch_queues(self) -> list[QueueInfo]:
        if self.failure:
            raise BrokerError(self.failure)
        return list(self.queues.values())

    def fetch_topology(self) -> Topology:
        if self.failure:
            raise BrokerError(self.failure)
        return self.topology

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        if self.failure or self.nodes_failure:
            raise BrokerError(self.failure or self.nodes_failure or "")
        return dict(self.nodes)

    def fetch_vhosts(self) -> set[str]:
        if self.failure:
            raise BrokerError(self.failure)
        return self.vhosts | {vhost for vhost, _ in self.queues}

    def close(self) -> None:
        pass


class InProcessAPI:
    """One sidecar built by the app factory, and an httpx client talking to it."""

    def __init__(self, sidecar: Sidecar, broker: ScriptedBroker,
                 client: httpx.AsyncClient) -> None:
        self.sidecar = sidecar
        self.broker = broker
        self.client = client
        self.engine = sidecar.runtime.engine

    async def poll(self) -> None:
        """One poll cycle, as the poller runs it."""
        await self.sidecar.runtime.poller.poll_once()


MakeAPI = Callable[..., "InProcessAPI"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def make_api(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """`await make_api(**settings)`: a sidecar with those options in its own data dir
    (and `live_source`, if given, as its live depth source)."""
    made: list[InProcessAPI] = []

    async def make(data_dir: Path | None = None, broker: ScriptedBroker | None = None,
                   live_source: LiveDepthSource | None = None,
                   **options: Any) -> InProcessAPI:
        settings = Settings(data_dir=data_dir or tmp_path / f"sidecar{len(made)}",
                            **options)
        scripted = broker or ScriptedBroker()
        sidecar = build(settings, scripted, live_source)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=sidecar.asgi),
                                   base_url="http://127.0.0.1:8080")
        made.append(InProcessAPI(sidecar, scripted, client))
        return made[-1]

    yield make
    for api in made:
        await api.client.aclose()
        api.sidecar.runtime.recorder.close()
        api.sidecar.store.close()


@pytest.fixture
async def api(make_api: Callable[..., Any]) -> InProcessAPI:
    """A sidecar with default options that has read the (empty) broker once."""
    made: InProcessAPI = await make_api()
    await made.poll()
    return made
