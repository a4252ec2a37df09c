"""The Qpid C++ adapter's mapping of QMF objects (values as a real qpidd 1.40 answered them;
tests/qpid/ drives the adapter against a running one), and the choice of adapter by
--broker or by the management URL's scheme."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sidecar.broker.broker_j import BrokerJAdapter
from sidecar.broker.figures import FigureCheck
from sidecar.broker.qpid_cpp import QpidCppAdapter, queue_from_qmf, refusal_text, topology_from_qmf
from sidecar.broker.rabbitmq_prometheus import RabbitMQDepthSources
from sidecar.broker.select import adapter_for, broker_kind
from sidecar.config import Settings
from sidecar.flow.thresholds import DefaultPolicy, Level
from sidecar.signals.exchange_routing import destinations

VHOST_REF = {"_object_name": "org.apache.qpid.broker:vhost:org.apache.qpid.broker:broker:"
                             "amqp-broker,/"}
QUEUE = {"name": "fc", "arguments": {"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 2},
         "msgDepth": 6, "byteDepth": 624, "flowStopped": True, "flowStoppedCount": 1,
         "durable": False, "autoDelete": False, "vhostRef": VHOST_REF}


def test_a_queue_carries_the_brokers_own_flow_state() -> None:
    info = queue_from_qmf(QUEUE, DefaultPolicy(), FigureCheck())
    assert (info.vhost, info.name, info.messages, info.bytes) == ("/", "fc", 6, 624)
    assert info.broker_flow is not None
    assert (info.broker_flow.stopped, info.broker_flow.stopped_count) == (True, 1)
    assert info.broker_flow.resolution.thresholds.count == Level(5, 2)
    assert info.limits is not None and info.limits.max_length is None


@pytest.mark.parametrize("missing", ["msgDepth", "byteDepth"])
def test_a_missing_depth_is_no_sample_not_an_empty_queue(missing: str) -> None:
    values = {k: v for k, v in QUEUE.items() if k != missing}
    info = queue_from_qmf(values, DefaultPolicy(), FigureCheck())
    assert info.messages is None or info.bytes is None
    assert info.messages != 0 and info.bytes != 0


def test_topology_from_qmf_objects() -> None:
    exchanges = [{"name": "", "type": "direct"}, {"name": "amq.fanout", "type": "fanout"}]
    bindings = [{"bindingKey": "k", "exchangeRef": {
                     "_object_name": "org.apache.qpid.broker:exchange:amq.fanout"},
                 "queueRef": {"_object_name": "org.apache.qpid.broker:queue:a:b"}}]
    topology = topology_from_qmf(exchanges, bindings)
    assert destinations(topology, "/", "amq.fanout", "x") == {"a:b"}


@pytest.mark.parametrize(("text", "ours"), [
    (('invalid-argument: Queue "q1": qpid.flow_resume_count=10 must be less or equal to '
      'qpid.flow_stop_count=5 (/build/qpid-cpp/src/qpid/broker/QueueFlowLimit.cpp:51)'),
     "qpid.flow_resume_count=10 must be less or equal to qpid.flow_stop_count=5"),
    (("invalid conversion: Cannot convert from int64 to uint32 "
      "(/build/qpid-cpp/src/qpid/types/Variant.cpp:380)"),
     "invalid conversion: Cannot convert from int64 to uint32"),
])
def test_refusals_read_like_ours(text: str, ours: str) -> None:
    assert refusal_text(text) == ours


@pytest.mark.parametrize(("options", "kind", "adapter"), [
    ({}, "rabbitmq", RabbitMQDepthSources),  # the management API, Prometheus when needed
    ({"management_url": "amqp://127.0.0.1:21672"}, "qpid-cpp", QpidCppAdapter),
    ({"management_url": "qpid://127.0.0.1:21672"}, "qpid-cpp", QpidCppAdapter),
    ({"management_url": "broker-j+http://127.0.0.1:8080"}, "broker-j", BrokerJAdapter),
    ({"management_url": "http://127.0.0.1:8080", "broker": "broker-j"}, "broker-j",
     BrokerJAdapter),
    ({"management_url": "127.0.0.1:21672", "broker": "qpid-cpp"}, "qpid-cpp", QpidCppAdapter),
])
def test_the_broker_is_chosen_by_option_or_scheme(options: dict[str, str], kind: str,
                                                   adapter: type) -> None:
    settings = Settings(**options)
    assert broker_kind(settings) == kind
    made = adapter_for(settings)
    assert isinstance(made, adapter)
    made.close()


def test_a_scheme_that_names_no_broker_is_refused() -> None:
    with pytest.raises(ValidationError, match="scheme names no broker"):
        Settings(management_url="ftp://127.0.0.1")


@pytest.mark.parametrize("url", ["amqp://127.0.0.1:21672", "broker-j+http://127.0.0.1:8080"])
def test_shared_state_through_the_broker_needs_rabbitmq(url: str) -> None:
    with pytest.raises(ValidationError, match="--shared-state local"):
        Settings(management_url=url, shared_state="broker")
    assert Settings(management_url=url, shared_state="local").shared_state == "local"
