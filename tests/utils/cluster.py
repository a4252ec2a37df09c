"""The three-node RabbitMQ cluster of deploy/ensure-rabbitmq-cluster.sh, for tests that read,
share state through, or stop nodes of a real cluster (never the main node)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import requests

from tests.utils.extra_node import ExtraNode

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "ensure-rabbitmq-cluster.sh"
NODES = (("flowc10", 10), ("flowc11", 11), ("flowc12", 12))  # the script's default


class Cluster:
    """Start, stop and talk to the cluster's nodes."""

    def __init__(self) -> None:
        self.nodes = [ExtraNode(name, index) for name, index in NODES]
        self.http = requests.Session()
        self.http.auth = ("guest", "guest")

    @property
    def management_urls(self) -> list[str]:
        return [node.management_url for node in self.nodes]

    def ensure(self) -> Cluster:
        """Start whatever node is not running and make sure all three are clustered."""
        done = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ensure-rabbitmq-cluster.sh start: {done.stderr.strip()}")
        return self

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, timeout=300,
                       check=False)

    def api(self, method: str, path: str, node: int = 0, **kw: Any) -> requests.Response:
        """A management API request through node `node` (0, 1 or 2)."""
        url = self.nodes[node].management_url + path
        return self.http.request(method, url, timeout=10, **kw)

    def live_api(self, method: str, path: str, **kw: Any) -> requests.Response:
        """A management API request through the first node that answers."""
        error: Exception | None = None
        for index in range(len(self.nodes)):
            try:
                return self.api(method, path, index, **kw)
            except requests.RequestException as exc:
                error = exc
        raise AssertionError(f"no node of the cluster answers: {error}")

    def connect(self, node: int) -> pika.BlockingConnection:
        """An AMQP connection to node `node`: classic queues it declares live there."""
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.nodes[node].amqp_port, socket_timeout=10,
            blocked_connection_timeout=60, heartbeat=30,
            client_properties={"connection_name": "flow-sidecar cluster tests"}))

    def queue(self, name: str, vhost: str = "/") -> dict[str, Any]:
        r = self.live_api("GET", f"/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}")
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    def delete_queue(self, name: str, vhost: str = "/") -> None:
        self.live_api("DELETE", f"/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}")

    def global_parameters(self, prefix: str = "flow-sidecar.") -> dict[str, Any]:
        r = self.live_api("GET", "/api/global-parameters")
        assert r.status_code == 200, r.text
        return {p["name"]: p["value"] for p in r.json() if p["name"].startswith(prefix)}

    def clear_global_parameters(self, prefix: str = "flow-sidecar.") -> None:
        for name in self.global_parameters(prefix):
            self.live_api("DELETE", f"/api/global-parameters/{quote(name, safe='')}")
