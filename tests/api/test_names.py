"""Names no broker object can have are refused before anything is stored for them; names
the broker accepts, control characters included, work and are escaped in the log."""

from __future__ import annotations

import logging

import pytest

from tests.api.conftest import InProcessAPI
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio

LONG = "q" * 256
LONG_UNICODE = "é" * 128  # 128 characters, 256 bytes of UTF-8


@pytest.mark.parametrize(("method", "path", "text"), [
    ("PUT", queue_path(LONG) + "/flow", "queue name is 256 bytes of UTF-8"),
    ("PUT", queue_path(LONG_UNICODE) + "/flow", "queue name is 256 bytes of UTF-8"),
    ("PUT", queue_path("q" * 20_000) + "/flow", "queue name is 20000 bytes"),
    ("PUT", queue_path("ok", vhost=LONG) + "/flow", "vhost name is 256 bytes"),
    ("PUT", queue_path("a\nb") + "/flow", "queue name 'a\\nb' contains CR or LF"),
    ("PUT", queue_path("a\rb") + "/flow", "contains CR or LF"),
    ("GET", queue_path(LONG), "queue name is 256 bytes"),
    ("DELETE", queue_path("a\r\nb") + "/flow", "contains CR or LF"),
    ("GET", flow_path(LONG), "queue name is 256 bytes"),
    ("GET", flow_path("a\nb"), "contains CR or LF"),
    ("GET", "/flow/" + "q" * 256, "queue name is 256 bytes"),  # the default vhost's path
    ("GET", f"/flow/exchange/%2F/{'x' * 256}", "exchange name is 256 bytes"),
    ("GET", "/flow/exchange/%2F/a%0Ab", "exchange name 'a\\nb' contains CR or LF"),
    ("GET", f"/flow/exchange/{'v' * 256}/amq.direct", "vhost name is 256 bytes"),
])
async def test_impossible_names_are_400_naming_the_segment(
    api: InProcessAPI, method: str, path: str, text: str
) -> None:
    body = b'{"qpid.flow_stop_count": 1}' if method == "PUT" else None
    r = await api.client.request(method, path, content=body,
                                 headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert text in r.json()["detail"]
    assert api.engine.settings_keys() == []


@pytest.mark.parametrize("name", ["q" * 255, "é" * 127 + "q", "nul\x00inside", "bell\x07",
                                  "tab\there"])
async def test_names_the_broker_accepts_are_accepted(api: InProcessAPI, name: str) -> None:
    r = await api.client.put(queue_path(name) + "/flow", json={"qpid.flow_stop_count": 3})
    assert r.status_code == 200, r.text
    assert api.engine.stored_settings(("/", name)) == {"qpid.flow_stop_count": 3}
    # a vhost may hold CR/LF (RabbitMQ keeps them in vhost names)
    vhost = "line\nbreak"
    r = await api.client.put(queue_path(name, vhost) + "/flow", json={"qpid.flow_stop_count": 3})
    assert r.status_code == 200, r.text


async def test_control_characters_in_broker_names_are_escaped_in_the_log(
    api: InProcessAPI, caplog: pytest.LogCaptureFixture
) -> None:
    api.broker.queue("evil\x00\x1b[2J", 5, vhost="v\nh",
                     arguments={"qpid.flow_stop_count": 4, "qpid.flow_resume_count": 9})
    with caplog.at_level(logging.INFO, logger="flow_sidecar"):
        await api.poll()
        await api.client.put(queue_path("evil\x00\x1b[2J", "v\nh") + "/flow",
                             json={"qpid.flow_stop_count": 4})
        await api.client.get(flow_path("evil\x00\x1b[2J", "v\nh"),
                             headers={"X-Producer-Id": "p\x01"})
    lines = [r.getMessage() for r in caplog.records]
    assert any("QUE-1003" in line for line in lines)
    assert any("flow configuration ignored" in line for line in lines)
    assert any("CHN-1005" in line for line in lines)
    for line in lines:
        assert not any(c in line for c in "\x00\x1b\n\x01"), line
    assert "[vh(v\\nh)/qu(evil\\x00\\x1b[2J)]" in "\n".join(lines)


async def test_the_openapi_document_states_the_name_rules(api: InProcessAPI) -> None:
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    for path in ("/flow/{vhost}/{queue}", "/queues/{vhost}/{queue}/flow",
                 "/flow/exchange/{vhost}/{exchange}", "/vhosts/{vhost}/quota"):
        for method, operation in paths[path].items():
            refusal = operation["responses"]["400"]["description"]
            assert "255 bytes of UTF-8" in refusal and "CR or LF" in refusal, (method, path)
    queue = next(p for p in paths["/flow/{vhost}/{queue}"]["get"]["parameters"]
                 if p["name"] == "queue")
    assert "255 bytes" in queue["description"] and "CR or LF" in queue["description"]
