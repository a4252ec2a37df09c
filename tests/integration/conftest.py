"""Fixtures for tests against the real RabbitMQ (started by deploy/ensure-rabbitmq.sh, or the
node FLOW_TEST_* names: tests/utils/broker_target.py) and real flow-sidecar processes. Every
test gets unique queue names, deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pika
import pytest
import requests

from flow_sidecar_client.publisher import FlowControlledPublisher
from tests.utils.broker_target import AMQP_URL, AUTH, amqp_parameters
from tests.utils.broker_target import MANAGEMENT_URL as MGMT
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually


class Broker:
    """The real RabbitMQ: AMQP through pika, management through its HTTP API."""

    def __init__(self) -> None:
        self.http = requests.Session()
        self.http.auth = AUTH
        self.connection = pika.BlockingConnection(amqp_parameters(
            client_properties={"connection_name": "flow-sidecar tests"},
            socket_timeout=10, blocked_connection_timeout=60, heartbeat=30))
        self.channel = self.connection.channel()
        self.created_queues: list[tuple[str, str]] = []
        self.created_policies: list[tuple[str, str]] = []
        self.created_exchanges: list[str] = []

    def api(self, method: str, path: str, **kw: object) -> requests.Response:
        return self.http.request(method, MGMT + path, timeout=10, **kw)  # type: ignore[arg-type]

    def declare(self, name: str, arguments: dict[str, object] | None = None) -> str:
        self.channel.queue_declare(name, durable=False, arguments=arguments or {})
        self.created_queues.append(("/", name))
        return name

    def fanout(self, exchange: str, *queues: str) -> str:
        """Declare a fanout exchange bound to `queues` (deleted after the test)."""
        self.channel.exchange_declare(exchange, "fanout")
        self.created_exchanges.append(exchange)
        for queue in queues:
            self.channel.queue_bind(queue, exchange)
        return exchange

    def publish(self, queue: str, count: int, body: bytes = b"x") -> None:
        for _ in range(count):
            self.channel.basic_publish("", queue, body)

    def drain(self, queue: str, count: int) -> None:
        for _ in range(count):
            method, _, _ = self.channel.basic_get(queue, auto_ack=True)
            assert method is not None, f"{queue} ran empty"

    def set_policy(self, name: str, pattern: str, definition: dict[str, object]) -> None:
        r = self.api("PUT", f"/api/policies/%2F/{quote(name, safe='')}",
                     json={"pattern": pattern, "definition": definition,
                           "apply-to": "queues", "priority": 10})
        assert r.status_code in (201, 204), r.text
        self.created_policies.append(("/", name))

    def cleanup(self) -> None:
        for exchange in reversed(self.created_exchanges):
            self.api("DELETE", f"/api/exchanges/%2F/{quote(exchange, safe='')}")
        self.created_exchanges.clear()
        for vhost, name in reversed(self.created_policies):
            self.api("DELETE", f"/api/policies/{quote(vhost, safe='')}/{quote(name, safe='')}")
        for vhost, name in reversed(self.created_queues):
            self.api("DELETE", f"/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}")
        self.created_queues.clear()
        self.created_policies.clear()


@pytest.fixture(scope="session")
def broker_available() -> None:
    try:
        ok = requests.get(MGMT + "/api/overview", auth=AUTH, timeout=5).ok
    except requests.RequestException:
        ok = False
    if not ok:
        pytest.fail(f"no RabbitMQ management API at {MGMT}: run the tests with deploy/test.sh, "
                    "which starts one")


@pytest.fixture
def broker(broker_available: None) -> Iterator[Broker]:
    b = Broker()
    try:
        yield b
    finally:
        b.cleanup()
        if b.connection.is_open:
            b.connection.close()


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Unique queue names per test: qname('orders') -> 'orders-test_x-1a2b3c'."""
    tag = uuid.uuid4().hex[:6]
    return lambda base: f"{base}-{request.node.name[:40]}-{tag}"


@pytest.fixture(scope="session")
def shared_sidecar(tmp_path_factory: pytest.TempPathFactory,
                   broker_available: None) -> Iterator[SidecarProcess]:
    """One sidecar for the tests that do not restart it: fast polls, short staleness,
    webhook receivers on loopback allowed (the tests' receivers listen there)."""
    proc = SidecarProcess(tmp_path_factory.mktemp("sidecar"), "--poll-interval", "0.2",
                          "--stale-after", "5", "--webhook-allow-private").start()
    yield proc
    proc.stop()


@pytest.fixture
def sidecar_factory(tmp_path: Path, broker_available: None) -> Iterator[
        Callable[..., SidecarProcess]]:
    """Own sidecar processes (restarts, kill -9, special flags); stopped after the test."""
    made: list[SidecarProcess] = []

    def make(*args: str, data_dir: Path | None = None, **kw: object) -> SidecarProcess:
        proc = SidecarProcess(data_dir or tmp_path / f"sidecar{len(made)}", *args, **kw)  # type: ignore[arg-type]
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.stop()


@pytest.fixture
def publishers() -> Iterator[Callable[..., FlowControlledPublisher]]:
    """Publishers closed after the test, whatever happened; on the target broker unless
    told another."""
    made: list[FlowControlledPublisher] = []

    def make(*args: object, **kw: object) -> FlowControlledPublisher:
        kw.setdefault("amqp", AMQP_URL)
        made.append(FlowControlledPublisher(*args, **kw))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for p in made:
        p._shutdown()


__all__ = ["AUTH", "MGMT", "Broker", "eventually", "flow_path", "queue_path"]
