"""`--depth-source auto` on real brokers: the Prometheus endpoint where it answers for every
node of the broker, the management API where it does not answer or answers for another
node, and the choice shown in /healthz (sidecar.broker.rabbitmq_prometheus).

The main node runs rabbitmq_prometheus (deploy/ensure-rabbitmq.sh enables it). The node
of another broker is the extra node `flowscale` (deploy/rabbitmq-node.sh, index 20, with
--prometheus: its endpoint on 16720), which bench/ten_thousand_queues.py uses too, started
with the same settings so that neither restarts it for the other."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.conftest import Broker
from tests.utils.broker_target import RETARGETED
from tests.utils.extra_node import ExtraNode
from tests.utils.flow import flow
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port

pytestmark = pytest.mark.skipif(RETARGETED, reason=(
    "the main 3.10 node's Prometheus endpoint (port 15692) is what these tests choose"))
OTHER_NODE = ExtraNode("flowscale", 20, "--prometheus", "collect_statistics_interval=5000")
OTHER_PROMETHEUS = "http://127.0.0.1:16720"


def depth_source(sidecar: SidecarProcess) -> dict[str, object]:
    return sidecar.get("/healthz").json()["depthSource"]  # type: ignore[no-any-return]


def test_auto_reads_counts_every_poll_and_bytes_from_prometheus(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5", "--no-live-depth").start()
    queue = broker.declare(qname("scraped"), {"qpid.flow_stop_count": 10,
                                              "qpid.flow_stop_size": 1000})
    source = eventually(lambda: (s := depth_source(sidecar))["active"] == "prometheus" and s)
    assert source["mode"] == "auto" and source["prometheusError"] is None
    assert "rabbitmq_prometheus" in str(source["reason"])
    assert source["bytesEverySeconds"] is not None and source["listingEverySeconds"] >= 30
    broker.publish(queue, 11, b"0123456789")  # the queue is new to the last listing
    stopped = eventually(lambda: (a := flow(sidecar, queue))["flowStopped"] and a, timeout=30)
    assert stopped["depth"]["messages"] == 11
    # bytes come with the figures as often as their cost allows: a few hundred queues, every
    # poll or so
    eventually(lambda: flow(sidecar, queue)["depth"]["bytes"] == 110, timeout=30)
    assert "queue depth now from the Prometheus endpoint" in sidecar.log()


def test_auto_falls_back_to_the_management_api_when_prometheus_does_not_answer(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5", "--no-live-depth",
                              "--prometheus-url", f"http://127.0.0.1:{free_port()}").start()
    queue = broker.declare(qname("listed"), {"qpid.flow_stop_count": 10})
    broker.publish(queue, 11)
    eventually(lambda: flow(sidecar, queue)["flowStopped"], timeout=30)
    source = depth_source(sidecar)
    assert source["active"] == "management" and "ConnectionError" in str(
        source["prometheusError"])
    assert "the management API's statistics" in str(source["reason"])
    assert sidecar.get("/healthz").json()["status"] == "ok"


def test_auto_does_not_take_the_figures_of_another_brokers_node(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """An endpoint that answers, but for a node of another broker (the default URL on a
    host with two brokers), would leave every queue without depth: not chosen."""
    OTHER_NODE.start()
    sidecar = sidecar_factory("--poll-interval", "0.5", "--no-live-depth",
                              "--prometheus-url", OTHER_PROMETHEUS).start()
    queue = broker.declare(qname("elsewhere"), {"qpid.flow_stop_count": 10})
    broker.publish(queue, 11)
    eventually(lambda: flow(sidecar, queue)["flowStopped"], timeout=30)
    source = depth_source(sidecar)
    assert source["active"] == "management"
    assert "answer for flowscale@" in str(source["prometheusError"])
    assert "not for rabbit@" in str(source["prometheusError"])


def test_a_node_on_this_machine_is_read_uncompressed(
        broker: Broker, qname: Callable[[str], str]) -> None:
    """rabbitmq_prometheus gzips its answer when asked, which costs it more CPU than it saves
    on loopback: the sidecar asks a node on this machine for the plain text (`PLAIN`)."""
    import requests

    from sidecar.broker.rabbitmq_prometheus import PrometheusEndpoints
    queue = broker.declare(qname("plain"))
    broker.publish(queue, 3)
    url = "http://127.0.0.1:15692"
    encodings: list[str | None] = []
    session = requests.Session()
    session.hooks["response"].append(
        lambda response, *_, **__: encodings.append(response.headers.get("Content-Encoding")))
    endpoints = PrometheusEndpoints([url], timeout=10.0, session=session)
    eventually(lambda: (f := endpoints.queue_figures().get(("/", queue))) is not None
               and f.messages == 3, timeout=30)
    assert encodings and set(encodings) <= {None, "identity"}
    asked = session.get(f"{url}/metrics/detailed", params={"family": "queue_coarse_metrics"})
    assert asked.headers.get("Content-Encoding") == "gzip"  # what requests' default gets
    endpoints.close()
