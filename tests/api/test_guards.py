"""The request guards in process: Content-Type and size of bodies, the Host a request names,
cross-origin writes, redirects, capped 422s and 405's `Allow`. (What needs a real socket,
timeouts and aborted uploads, is in tests/integration/test_limits.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import queue_path

pytestmark = pytest.mark.anyio
JSON = {"Content-Type": "application/json"}
PUT_PATH = queue_path("guarded") + "/flow"
BODY = b'{"qpid.flow_stop_count": 7}'


@pytest.mark.parametrize("content_type", [
    None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "application/jsonx", "text/json",
])
async def test_writes_with_a_body_need_json(api: InProcessAPI, content_type: str | None
                                            ) -> None:
    """A browser's simple POST (text/plain, form encoding) from any page must not write."""
    headers = {} if content_type is None else {"Content-Type": content_type}
    r = await api.client.put(PUT_PATH, content=BODY, headers=headers)
    assert r.status_code == 415, r.text
    assert "Content-Type: application/json" in r.json()["detail"]
    hook = await api.client.post("/webhooks", headers=headers, content=json.dumps(
        {"url": "http://127.0.0.1:9/h", "secret": "s" * 20}))
    assert hook.status_code == 415
    assert api.engine.settings_keys() == [] and api.sidecar.runtime.outbox.subscriptions() == []


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON", "application/merge-patch+json"])
async def test_json_content_types_are_read(api: InProcessAPI, content_type: str) -> None:
    r = await api.client.put(PUT_PATH, content=BODY, headers={"Content-Type": content_type})
    assert r.status_code == 200, r.text


async def test_writes_without_a_body_need_no_content_type(api: InProcessAPI) -> None:
    assert (await api.client.put(PUT_PATH, content=BODY, headers=JSON)).status_code == 200
    assert (await api.client.delete(PUT_PATH)).status_code == 200


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.io",
                                  "localhost.attacker.example", "10.0.0.1:8080"])
async def test_a_foreign_host_header_is_refused(api: InProcessAPI, host: str) -> None:
    """DNS rebinding: a page of attacker.example whose name now points at 127.0.0.1."""
    put = await api.client.put(PUT_PATH, content=BODY, headers={**JSON, "Host": host})
    assert put.status_code == 400, put.text
    assert "Host" in put.json()["detail"] and "--allowed-hosts" in put.json()["detail"]
    api.broker.queue("guarded")
    await api.poll()
    read = await api.client.get("/flow/guarded", headers={"Host": host})
    assert read.status_code == 400
    assert api.engine.settings_keys() == []


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST",
                                  "[::1]:8080", "app.localhost:8080"])
async def test_own_and_local_hosts_are_served(api: InProcessAPI, host: str) -> None:
    r = await api.client.put(PUT_PATH, content=BODY, headers={**JSON, "Host": host})
    assert r.status_code == 200, r.text


async def test_configured_hosts_are_served(make_api: Any) -> None:
    api: InProcessAPI = await make_api(allowed_hosts="flow.example.com, *.svc.cluster.local")
    await api.poll()
    for host in ("flow.example.com", "flow.example.com:443", "flow.ns.svc.cluster.local:8080"):
        r = await api.client.put(PUT_PATH, content=BODY, headers={**JSON, "Host": host})
        assert r.status_code == 200, (host, r.text)
    r = await api.client.put(PUT_PATH, content=BODY, headers={**JSON, "Host": "example.com"})
    assert r.status_code == 400


async def test_a_wildcard_listener_serves_its_addresses_but_not_foreign_names(
        make_api: Any) -> None:
    """On 0.0.0.0 the sidecar is reached by any of the host's addresses (probes and
    Prometheus use the pod IP); a name still has to be local or configured."""
    api: InProcessAPI = await make_api(listen="0.0.0.0:8080", token="t0ken")
    await api.poll()
    auth = {**JSON, "Authorization": "Bearer t0ken"}
    for host, status in (("10.1.2.3:8080", 200), ("[fd00::1]:8080", 200),
                         ("attacker.example:8080", 400)):
        r = await api.client.put(PUT_PATH, content=BODY, headers={**auth, "Host": host})
        assert r.status_code == status, (host, r.text)


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://127.0.0.1:9999",
                                    "https://127.0.0.1:8080"])
async def test_cross_origin_writes_are_refused_without_the_token(api: InProcessAPI,
                                                                 origin: str) -> None:
    r = await api.client.put(PUT_PATH, content=BODY, headers={**JSON, "Origin": origin})
    assert r.status_code == 403, r.text
    assert "Origin" in r.json()["detail"]
    gone = await api.client.delete(PUT_PATH, headers={"Origin": origin})
    assert gone.status_code == 403
    assert api.engine.settings_keys() == []


async def test_same_origin_writes_and_cross_origin_reads_are_served(api: InProcessAPI) -> None:
    same = await api.client.put(PUT_PATH, content=BODY,
                                headers={**JSON, "Origin": "http://127.0.0.1:8080"})
    assert same.status_code == 200, same.text
    read = await api.client.get(queue_path("guarded"), headers={"Origin": "http://x.example"})
    assert read.status_code == 200


async def test_cross_origin_writes_with_the_token_are_served(make_api: Any) -> None:
    api: InProcessAPI = await make_api(token="t0ken")
    await api.poll()
    headers = {**JSON, "Origin": "http://tool.example"}
    assert (await api.client.put(PUT_PATH, content=BODY, headers=headers)).status_code == 403
    r = await api.client.put(PUT_PATH, content=BODY,
                             headers={**headers, "Authorization": "Bearer t0ken"})
    assert r.status_code == 200, r.text


async def test_no_redirect_echoes_the_host(api: InProcessAPI) -> None:
    for path in ("/queues/", "/webhooks/", "/defaults/"):
        r = await api.client.get(path, headers={"Host": "localhost:8080"})
        assert "location" not in r.headers, (path, r.headers)
        assert r.status_code == 404
    root = await api.client.get("/")
    assert root.status_code == 307 and root.headers["location"] == "/ui"


async def test_bodies_over_the_limit_are_413_and_change_nothing(api: InProcessAPI) -> None:
    big = b'{"qpid.flow_stop_count": 7, "pad": "' + b"x" * 70_000 + b'"}'
    r = await api.client.put(PUT_PATH, content=big, headers=JSON)
    assert r.status_code == 413, r.text
    assert "65,536 bytes" in r.json()["detail"] and "--max-body-bytes" in r.json()["detail"]
    assert r.headers["connection"] == "close"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked encoding
        yield b'{"qpid.flow_stop_count": 7, "pad": "'
        for _ in range(20):
            yield b"x" * 4096
        yield b'"}'

    chunked = await api.client.put(PUT_PATH, content=chunks(), headers=JSON)
    assert chunked.status_code == 413
    assert api.engine.settings_keys() == []


async def test_the_body_limit_is_an_option(make_api: Any) -> None:
    api: InProcessAPI = await make_api(max_body_bytes=20)
    await api.poll()
    exactly = b'{"flow_stop_size":7}'
    assert len(exactly) == 20
    assert (await api.client.put(PUT_PATH, content=exactly, headers=JSON)).status_code == 200
    assert (await api.client.put(PUT_PATH, content=BODY, headers=JSON)).status_code == 413


@pytest.mark.parametrize("body", [
    "{" + ",".join(f'"k{i}":1' for i in range(6000)) + "}",      # unknown keys
    "[" + ",".join(str(i) for i in range(12000)) + "]",          # not an object
    '{"qpid.flow_stop_count": "' + "9" * 60_000 + '"}',          # one huge bad value
])
async def test_a_422_echoes_a_few_short_errors(api: InProcessAPI, body: str) -> None:
    assert len(body) < 65_536
    r = await api.client.put(PUT_PATH, content=body, headers=JSON)
    assert r.status_code == 422
    assert len(r.content) < 4096, len(r.content)
    detail = r.json()["detail"]
    assert 1 <= len(detail) <= 6
    assert all(len(json.dumps(d.get("input"))) <= 120 for d in detail)


async def test_a_422_says_how_many_errors_it_left_out(api: InProcessAPI) -> None:
    body = "{" + ",".join(f'"k{i}":1' for i in range(100)) + "}"
    detail = (await api.client.put(PUT_PATH, content=body, headers=JSON)).json()["detail"]
    assert [d["loc"] for d in detail[:5]] == [["body", f"k{i}"] for i in range(5)]
    assert detail[-1]["msg"] == "95 more errors not shown"


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("OPTIONS", "/defaults", "DELETE, GET, PUT"),
    ("PATCH", "/defaults", "DELETE, GET, PUT"),
    ("OPTIONS", "/queues/%2F/q/flow", "DELETE, PUT"),
    ("POST", "/queues/%2F/q/flow", "DELETE, PUT"),
    ("OPTIONS", "/webhooks", "GET, POST"),
    ("DELETE", "/webhooks", "GET, POST"),
    ("PUT", "/webhooks/wh_x", "DELETE, GET"),
    ("POST", "/flow/%2F/q", "GET"),
])
async def test_405_lists_every_method_of_the_path(api: InProcessAPI, method: str, path: str,
                                                  allow: str) -> None:
    r = await api.client.request(method, path)
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == allow


async def test_integral_numbers_are_integers(api: InProcessAPI) -> None:
    """JSON Schema counts 900.0 as an integer, and so does the API (9.5 is still refused)."""
    r = await api.client.put(PUT_PATH, content=b'{"qpid.flow_stop_count": 900.0}', headers=JSON)
    assert r.status_code == 200, r.text
    assert r.json()["settings"]["qpid.flow_stop_count"] == 900
