"""Fixtures for tests against a real three-node RabbitMQ cluster (deploy/ensure-rabbitmq-
cluster.sh, started here once per session and stopped at its end unless FLOW_KEEP_CLUSTER=1
says to keep it for the next run) and real flow-sidecar processes reading it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pika
import pytest

from tests.utils.cluster import Cluster
from tests.utils.sidecar_process import SidecarProcess


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    running = Cluster().ensure()
    yield running
    if os.environ.get("FLOW_KEEP_CLUSTER") != "1":
        running.stop()


@pytest.fixture
def live_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with all three nodes running, before and after the test (a test that
    stops a node may fail before it starts it again)."""
    cluster.ensure()
    yield cluster
    cluster.ensure()


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Unique queue names per test: qname('orders') -> 'orders-test_x-1a2b3c'."""
    tag = uuid.uuid4().hex[:6]
    return lambda base: f"{base}-{request.node.name[:40]}-{tag}"


@pytest.fixture
def sidecars(tmp_path: Path, cluster: Cluster) -> Iterator[Callable[..., SidecarProcess]]:
    """flow-sidecar processes reading the cluster; stopped after the test."""
    made: list[SidecarProcess] = []

    def make(*args: str, data_dir: Path | None = None) -> SidecarProcess:
        # the tests' webhook receivers listen on loopback
        proc = SidecarProcess(data_dir or tmp_path / f"sidecar{len(made)}",
                              "--webhook-allow-private", *args)
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.stop()


class ClusterQueues:
    """Queues a test declares on chosen nodes of the cluster; deleted after the test."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.names: list[str] = []

    def declare(self, name: str, node: int, messages: int = 0, *,
                arguments: dict[str, object] | None = None) -> str:
        """Declare `name` through node `node` (a classic queue lives there; a quorum queue
        has its leader there and members on all three) and publish `messages` to it."""
        connection = self.cluster.connect(node)
        try:
            connection.channel().queue_declare(name, durable=True, arguments=arguments or {})
            self.names.append(name)
        finally:
            connection.close()
        self.publish(name, node, messages)
        return name

    def publish(self, name: str, node: int, messages: int) -> None:
        """Publish `messages` through node `node`, persistent (they outlive a node restart)
        and each confirmed by the broker."""
        persistent = pika.BasicProperties(delivery_mode=2)
        connection = self.cluster.connect(node)
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            for _ in range(messages):
                channel.basic_publish("", name, b"x", persistent)
        finally:
            connection.close()

    def drain(self, name: str, node: int, messages: int) -> None:
        connection = self.cluster.connect(node)
        try:
            channel = connection.channel()
            for _ in range(messages):
                method, _, _ = channel.basic_get(name, auto_ack=True)
                assert method is not None, f"{name} ran empty"
        finally:
            connection.close()

    def cleanup(self) -> None:
        for name in reversed(self.names):
            self.cluster.delete_queue(name)


@pytest.fixture
def cluster_queues(cluster: Cluster) -> Iterator[ClusterQueues]:
    made = ClusterQueues(cluster)
    yield made
    made.cleanup()


@pytest.fixture
def shared_state(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with no flow-sidecar global parameters and an empty delivery queue,
    before and after the test (replicas of different tests must not share state)."""
    def clear() -> None:
        cluster.clear_global_parameters()
        cluster.live_api("DELETE", "/api/queues/%2F/flow-sidecar.webhooks/contents")

    clear()
    yield cluster
    clear()


def shared_flags(cluster: Cluster, *extra: str, first: int = 0) -> tuple[str, ...]:
    """Flags of a replica sharing its state through the test cluster (fast polls), reading
    through node `first` and then the others."""
    nodes = cluster.nodes[first:] + cluster.nodes[:first]
    return ("--shared-state", "broker",
            "--management-url", ",".join(n.management_url for n in nodes),
            "--shared-amqp-url", ",".join(f"127.0.0.1:{n.amqp_port}" for n in nodes),
            "--poll-interval", "0.3", *extra)
