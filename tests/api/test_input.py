"""Bad input gets a clear 4xx and loses nothing (in process: no broker needed)."""

from __future__ import annotations

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio
NEVER = queue_path("input-check-never-created")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"qpid.flow_stop_count": 900', "body"),                   # malformed JSON
        ("[]", "body"),
        ("null", "body"),
        ('"900"', "body"),
        ('{"qpid.flow_stop_count": -1}', "qpid.flow_stop_count"),    # negative
        ('{"qpid.flow_stop_count": 9.5}', "qpid.flow_stop_count"),   # float
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
async def test_bad_bodies_are_422_naming_the_field_and_store_nothing(
    api: InProcessAPI, body: str | bytes, field: str
) -> None:
    r = await api.client.put(NEVER + "/flow", content=body,
                             headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    locs = [d["loc"] for d in r.json()["detail"]]
    assert any(loc[-1] == field or (field == "body" and loc == ["body"]) for loc in locs), locs
    assert (await api.client.get(NEVER)).status_code == 404
    assert api.engine.settings_keys() == []


async def test_settings_refused_by_qpid_rules_are_422_naming_both_keys(
        api: InProcessAPI) -> None:
    r = await api.client.put(NEVER + "/flow", json={"qpid.flow_stop_count": 500,
                                                    "qpid.flow_resume_count": 600})
    assert r.status_code == 422
    assert r.json()["detail"][0]["msg"] == ("qpid.flow_resume_count=600 must be less or "
                                            "equal to qpid.flow_stop_count=500")
    assert api.engine.settings_keys() == []


async def test_form_encoded_curl_body_is_refused_with_the_header_to_send(
        api: InProcessAPI) -> None:
    """`curl -X PUT url -d '{...}'` sends form encoding, as does a cross-site HTML form:
    refused, with the header that makes it work (the docs' examples send it)."""
    path = queue_path("curl") + "/flow"
    r = await api.client.put(path, content='{"qpid.flow_stop_count": 7}',
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415, r.text
    assert "send 'Content-Type: application/json'" in r.json()["detail"]
    ok = await api.client.put(path, content='{"qpid.flow_stop_count": 7}',
                              headers={"Content-Type": "application/json"})
    assert ok.status_code == 200 and ok.json()["settings"]["qpid.flow_stop_count"] == 7
    assert (await api.client.delete(path)).status_code == 200
    assert (await api.client.delete(path)).status_code == 404


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
async def test_bad_or_unknown_paths_are_4xx_with_a_message(
    api: InProcessAPI, method: str, path: str, status: int, text: str
) -> None:
    body = b'{"qpid.flow_stop_count": 1}' if method == "PUT" else None
    # httpx keeps a path it is given as raw bytes when it is already percent-encoded
    r = await api.client.request(method, path, content=body,
                                 headers={"Content-Type": "application/json"})
    assert (r.status_code, text in str(r.json()["detail"])) == (status, True), r.text


async def test_unknown_queue_before_the_first_poll_is_503(make_api: object) -> None:
    fresh: InProcessAPI = await make_api()  # type: ignore[operator]
    r = await fresh.client.get(flow_path("orders"))
    assert r.status_code == 503 and r.headers["retry-after"] == "1"


@pytest.mark.parametrize("headers", [
    {"X-Producer-Capacity": "abc"}, {"X-Producer-Capacity": "1234567890"},
    {"X-Producer-Id": "p1", "X-Producer-Capacity": "-1"}, {"X-Producer-Id": ""},
    {"X-Producer-Id": "p1", "X-Producer-Published": "-1"},
    {"X-Producer-Published": "1e3"}, {"X-Producer-Id": "p1", "X-Producer-Published": "9" * 19},
])
async def test_bad_producer_headers_are_422_on_plain_and_long_poll_requests(
    api: InProcessAPI, headers: dict[str, str]
) -> None:
    """A plain GET is answered by the fast path, one with a query string by the routes:
    both judge the producer headers alike."""
    api.broker.queue("hdr")
    await api.poll()
    for params in (None, {"wait": "0.01"}):
        r = await api.client.get(flow_path("hdr"), params=params, headers=headers)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"][0]["loc"][0] == "header"


@pytest.mark.parametrize("url", ["http://exa\x01mple.com/hook", "http://example.com\x7f/hook",
                                 "http://example.com/ho\x00ok", "http://exa mple.com/"])
async def test_a_webhook_url_with_control_characters_is_422(api: InProcessAPI,
                                                           url: str) -> None:
    r = await api.client.post("/webhooks", json={"url": url, "secret": "s"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][-1] == "url"
    assert (await api.client.get("/webhooks")).json() == []
