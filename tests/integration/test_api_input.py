"""Bad input gets a clear 4xx and loses nothing; names with any characters work."""

from __future__ import annotations

import glob
import http.client
import json
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess

Names = Callable[[str], str]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"qpid.flow_stop_count": 900', "body"),                   # malformed JSON
        ("[]", "body"),
        ("null", "body"),
        ('"900"', "body"),
        ('{"qpid.flow_stop_count": -1}', "qpid.flow_stop_count"),    # negative
        ('{"qpid.flow_stop_count": 9.5}', "qpid.flow_stop_count"),   # float
        ('{"qpid.flow_stop_count": 900.0}', "qpid.flow_stop_count"),
        ('{"qpid.flow_stop_count": "900"}', "qpid.flow_stop_count"),  # string
        ('{"qpid.flow_stop_count": true}', "qpid.flow_stop_count"),
        ('{"qpid.flow_stop_count": 1' + "0" * 40 + "}", "qpid.flow_stop_count"),  # huge
        ('{"qpid.flow_stop_count": 900, "qpid.flow_stop_cuont": 5}', "qpid.flow_stop_cuont"),
        ('{"max_length": 5}', "max_length"),                         # unknown key
        ('{"qpid.flow_stop_count": NaN}', "qpid.flow_stop_count"),   # not JSON numbers
        ('{"qpid.flow_stop_count": 1e400}', "qpid.flow_stop_count"),  # infinity
        ('{"qpid.flow_stop_count": -Infinity}', "qpid.flow_stop_count"),
        (b'{"qpid.flow_stop_count": "\xff\xfe"}', "body"),          # not UTF-8
        (b"\xff\xfe", "body"),
    ],
)
def test_bad_bodies_are_422_naming_the_field_and_store_nothing(
    shared_sidecar: SidecarProcess, body: str | bytes, field: str
) -> None:
    path = queue_path("input-check-never-created") + "/flow"
    r = shared_sidecar.put(path, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    locs = [d["loc"] for d in r.json()["detail"]]
    assert any(loc[-1] == field or (field == "body" and loc == ["body"]) for loc in locs), locs
    assert shared_sidecar.get(queue_path("input-check-never-created")).status_code == 404


def test_form_encoded_curl_body_is_read_as_json(shared_sidecar: SidecarProcess,
                                                qname: Names) -> None:
    """`curl -X PUT url -d '{...}'` sends form encoding; operators type exactly that."""
    q = qname("curl")
    r = shared_sidecar.put(queue_path(q) + "/flow", data='{"qpid.flow_stop_count": 7}',
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    assert r.json()["settings"]["qpid.flow_stop_count"] == 7
    assert shared_sidecar.delete(queue_path(q) + "/flow").status_code == 200
    assert shared_sidecar.delete(queue_path(q) + "/flow").status_code == 404


def raw(sidecar: SidecarProcess, method: str, path: str, body: bytes | None = None
        ) -> tuple[int, dict]:
    """Send the path byte for byte (requests would re-quote a stray '%')."""
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=10)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize(("method", "path", "status", "text"), [
    ("GET", "/flow/%2F/a%zz", 400, "two hex digits"),
    ("GET", "/flow/a%2", 400, "two hex digits"),
    ("GET", "/flow/%ff%fe", 400, "not percent-encoded UTF-8"),
    ("GET", "/queues/%2F/%C3%28", 400, "not percent-encoded UTF-8"),
    ("PUT", "/queues/%2F/bad%zzname/flow", 400, "queue 'bad%zzname'"),
    ("DELETE", "/queues/%zz/q/flow", 400, "vhost '%zz'"),
    ("GET", "/flow/x/y/z", 404, "Not Found"),
    ("GET", "/flow/%2F/never-declared-queue", 404, "not known to the broker"),
    ("GET", "/queues/%2F/never-declared", 404, "no stored settings"),
    ("DELETE", "/queues/%2F/never-declared/flow", 404, "no settings are stored"),
])
def test_bad_or_unknown_paths_are_4xx_with_a_message(
    shared_sidecar: SidecarProcess, method: str, path: str, status: int, text: str
) -> None:
    body = b'{"qpid.flow_stop_count": 1}' if method == "PUT" else None
    got, answer = raw(shared_sidecar, method, path, body)
    assert (got, text in str(answer["detail"])) == (status, True), answer


@pytest.mark.parametrize("base", ["a/b", "with space", "100%", "заказы", "注文 🚀", "q?x#y"])
def test_any_queue_name_round_trips(broker: Broker, shared_sidecar: SidecarProcess,
                                    qname: Names, base: str) -> None:
    q = known(shared_sidecar, broker.declare(qname(base)))
    answer = flow(shared_sidecar, q)
    assert answer["queue"] == q and answer["vhost"] == "/"
    # the default-vhost form: /flow/{queue}
    r = shared_sidecar.get("/flow/" + quote(q, safe=""))
    assert r.status_code == 200 and r.json()["queue"] == q
    r = shared_sidecar.put(queue_path(q) + "/flow", json={"qpid.flow_stop_count": 3})
    assert r.status_code == 200 and r.json()["queue"] == q
    listed = shared_sidecar.get("/queues", params={"name": glob.escape(q)}).json()
    assert [v["queue"] for v in listed] == [q]


def test_queue_in_another_vhost(broker: Broker, shared_sidecar: SidecarProcess,
                                qname: Names) -> None:
    vhost = qname("vh/ü")
    path = f"/api/vhosts/{quote(vhost, safe='')}"
    assert broker.api("PUT", path).status_code in (201, 204)
    try:
        assert broker.api("PUT", f"/api/permissions/{quote(vhost, safe='')}/guest",
                          json={"configure": ".*", "write": ".*", "read": ".*"}).ok
        assert broker.api("PUT", f"/api/queues/{quote(vhost, safe='')}/orders",
                          json={"durable": False, "arguments": {"qpid.flow_stop_count": 5}}
                          ).status_code in (201, 204)
        known(shared_sidecar, "orders", vhost)
        answer = flow(shared_sidecar, "orders", vhost)
        assert answer["vhost"] == vhost and answer["sources"]["count"] == "arguments"
        assert shared_sidecar.get(flow_path("orders", "/")).status_code in (404, 200)
    finally:
        broker.api("DELETE", path)


def test_flow_answer_shape(broker: Broker, shared_sidecar: SidecarProcess, qname: Names) -> None:
    q = known(shared_sidecar, broker.declare(qname("shape"), {"qpid.flow_stop_count": 900,
                                                              "qpid.flow_resume_count": 500}))
    answer = flow(shared_sidecar, q)
    for key in ("vhost", "queue", "flowStopped", "flowStoppedCount", "depth", "thresholds",
                "sources", "sampledAt", "stale", "version"):
        assert key in answer
    assert set(answer["thresholds"]) == {"qpid.flow_stop_count", "qpid.flow_resume_count",
                                         "qpid.flow_stop_size", "qpid.flow_resume_size"}
    assert answer["sampledAt"].endswith("Z")
    json.dumps(answer)


@pytest.mark.parametrize("headers", [
    {"X-Producer-Capacity": "abc"}, {"X-Producer-Capacity": "1234567890"},
    {"X-Producer-Id": "p1", "X-Producer-Capacity": "-1"}, {"X-Producer-Id": ""},
])
def test_bad_producer_headers_are_422_on_plain_and_long_poll_requests(
    broker: Broker, shared_sidecar: SidecarProcess, qname: Names, headers: dict[str, str]
) -> None:
    """A plain GET is answered by the fast path, one with a query string by the routes:
    both judge the producer headers alike."""
    q = known(shared_sidecar, broker.declare(qname("hdr")))
    for params in (None, {"wait": "0.01"}):
        r = shared_sidecar.get(flow_path(q), params=params, headers=headers)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"][0]["loc"][0] == "header"
