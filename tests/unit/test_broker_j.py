"""The Broker-J adapter against recorded answers of its REST API (recorded/broker_j.json,
built from Broker-J's documentation and source: no Broker-J runs here, so the adapter is
untested against a live broker, as docs/qpid.md says). The transport is a requests adapter
that answers from the recording: the adapter's own HTTP walk runs unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from requests.adapters import BaseAdapter

from sidecar.broker import BrokerError
from sidecar.broker.broker_j import BrokerJAdapter, thresholds_of
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.model import QueueInfo
from sidecar.signals.exchange_routing import destinations

RESUME = "queue.queueFlowResumeLimit"
RECORDED = json.loads((Path(__file__).parent / "recorded" / "broker_j.json").read_text())


class Recorded(BaseAdapter):
    """Answers GETs from the recording; anything else is a 404."""

    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__()
        self.answers = answers
        self.asked: list[str] = []
        self.queries: dict[str, str] = {}

    def send(self, request: requests.PreparedRequest, **kw: Any) -> requests.Response:
        url = requests.utils.urlparse(request.url)
        path = url.path
        self.asked.append(path)
        self.queries[path] = url.query
        response = requests.Response()
        response.request = request
        response.status_code = 200 if path in self.answers else 404
        body = json.dumps(self.answers.get(path, {"errorMessage": "Not Found"})).encode()
        response.raw = urllib3.HTTPResponse(io.BytesIO(body), preload_content=False)
        return response

    def close(self) -> None:
        pass


def adapter(answers: dict[str, Any] = RECORDED["answers"]) -> tuple[BrokerJAdapter, Recorded]:
    transport = Recorded(answers)
    session = requests.Session()
    session.mount("http://", transport)
    return BrokerJAdapter("http://broker-j:8080", "admin", "admin", session=session), transport


def by_name(queues: list[QueueInfo]) -> dict[str, QueueInfo]:
    return {q.name: q for q in queues}


def test_queues_with_depth_and_brokers_own_state() -> None:
    broker, transport = adapter()
    queues = by_name(broker.fetch_queues())
    assert transport.asked == ["/api/latest/virtualhostnode", "/api/latest/virtualhost/default",
                               "/api/latest/queue/default/default"]
    orders = queues["orders"]
    assert (orders.vhost, orders.messages, orders.bytes) == ("default", 1100, 11000000)
    assert orders.broker_flow is not None and orders.broker_flow.stopped is True
    assert orders.broker_flow.stopped_count is None  # Broker-J keeps no counter
    assert orders.broker_flow.resolution.thresholds == Thresholds(
        size=Level(10485760, 8388608))
    invoices = queues["invoices"].broker_flow
    assert invoices is not None and invoices.stopped is False
    # 7.x: stops are the maxima, resumes ceil(70 % of them)
    assert invoices.resolution.thresholds == Thresholds(count=Level(50, 35),
                                                        size=Level(1000, 700))
    audit = queues["audit"]
    assert audit.limits is not None and audit.limits.ring
    assert audit.broker_flow is not None and not audit.broker_flow.resolution.thresholds.enabled


PFC = {"overflowPolicy": "PRODUCER_FLOW_CONTROL"}


@pytest.mark.parametrize(("item", "expected"), [
    # 6.x: queueFlowResumeSizeBytes defaults to 0, and Broker-J then resumes when empty
    ({"queueFlowControlSizeBytes": 1000}, Thresholds(size=Level(1000, 0))),
    ({"queueFlowControlSizeBytes": 1000, "queueFlowResumeSizeBytes": 0},
     Thresholds(size=Level(1000, 0))),
    ({"queueFlowControlSizeBytes": 1000, "queueFlowResumeSizeBytes": 600},
     Thresholds(size=Level(1000, 600))),
    # 7.x: a limit of 0 resumes when empty; a maximum of 0 is enforced
    ({**PFC, "maximumQueueDepthBytes": 1000, "context": {RESUME: "0"}},
     Thresholds(size=Level(1000, 0))),
    ({**PFC, "maximumQueueDepthBytes": 1000, "context": {RESUME: "70.00"}},
     Thresholds(size=Level(1000, 700))),
    ({**PFC, "maximumQueueDepthMessages": 0, "maximumQueueDepthBytes": -1},
     Thresholds(count=Level(0, 0))),
])
def test_thresholds_as_broker_j_applies_them(item: dict[str, Any],
                                             expected: Thresholds) -> None:
    assert thresholds_of(item) == expected


def test_queues_are_read_with_their_inherited_context() -> None:
    broker, transport = adapter()
    broker.fetch_queues()
    assert "excludeInheritedContext=false" in transport.queries["/api/latest/queue/default/default"]


def test_thresholds_of_both_models() -> None:
    assert thresholds_of({"overflowPolicy": "PRODUCER_FLOW_CONTROL",
                          "maximumQueueDepthBytes": 1000,
                          "maximumQueueDepthMessages": -1}) == Thresholds(size=Level(1000, 800))
    assert thresholds_of({"overflowPolicy": "REJECT", "maximumQueueDepthBytes": 1000}) == \
        Thresholds()


def test_topology_from_exchange_bindings() -> None:
    broker, _ = adapter()
    topology = broker.fetch_topology()
    assert destinations(topology, "default", "billing", "") == {"invoices", "audit"}
    assert destinations(topology, "default", "amq.direct", "orders") == {"orders"}


def test_a_broker_answering_404_is_a_broker_error() -> None:
    broker, _ = adapter({})
    with pytest.raises(BrokerError, match="HTTP 404"):
        broker.fetch_queues()
