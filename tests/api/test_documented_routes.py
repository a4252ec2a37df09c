"""docs/api.md against the app: its route table lists exactly the routes `/openapi.json`
describes (plus the few pages kept out of the schema, which must answer), and its example
`/flow` answer has exactly the fields a real answer has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.api.conftest import InProcessAPI, MakeAPI
from tests.unit.test_docs import PAGES, blocks, json_example, shell_lines

pytestmark = pytest.mark.anyio

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
# served, documented, and left out of the OpenAPI schema on purpose
OUTSIDE_THE_SCHEMA = {("GET", "/ui"), ("GET", "/"), ("GET", "/docs"),
                      ("GET", "/openapi.json")}
ROW = re.compile(r"^\| *((?:`[A-Z]+`(?:, )?)+) *\| *((?:`/[^`]*`(?:, )?)+) *\|")


def normalised(path: str) -> str:
    """A path with its parameters unnamed: `/webhooks/{id}` and `/webhooks/{sub_id}` are
    the same route."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def documented_routes(text: str) -> set[tuple[str, str]]:
    """(method, path) for every row of the page's route table."""
    routes = set()
    for line in text.splitlines():
        if match := ROW.match(line):
            methods = re.findall(r"`([A-Z]+)`", match.group(1))
            paths = re.findall(r"`(/[^`]*)`", match.group(2))
            routes |= {(m, normalised(p)) for m in methods for p in paths}
    return routes


async def schema_routes(api: InProcessAPI) -> set[tuple[str, str]]:
    answer = await api.client.get("/openapi.json")
    assert answer.status_code == 200
    return {(method.upper(), normalised(path))
            for path, operations in answer.json()["paths"].items()
            for method in operations}


def test_the_table_parser_reads_every_row_shape() -> None:
    text = ("| `GET`, `POST` | `/webhooks` | list; subscribe |\n"
            "| `GET` | `/ui`, `/` | the dashboard |\n| not a route | x | y |\n")
    assert documented_routes(text) == {("GET", "/webhooks"), ("POST", "/webhooks"),
                                       ("GET", "/ui"), ("GET", "/")}


async def test_the_route_table_is_the_apps(api: InProcessAPI) -> None:
    documented = documented_routes(API_PAGE.read_text())
    served = await schema_routes(api)
    assert {"missing from docs/api.md": sorted(served - documented),
            "not served": sorted(documented - served - OUTSIDE_THE_SCHEMA)} == \
        {"missing from docs/api.md": [], "not served": []}


async def test_pages_outside_the_schema_are_served(api: InProcessAPI) -> None:
    for method, path in OUTSIDE_THE_SCHEMA:
        answer = await api.client.request(method, path)
        assert answer.status_code in (200, 307), (path, answer.status_code)


def example_answer() -> dict[str, Any]:
    examples = [json_example(body) for language, body in blocks(API_PAGE.read_text())
                if language == "json"]
    answers = [e for e in examples if {"vhost", "queue", "version"} <= set(e)]
    assert answers
    result: dict[str, Any] = max(answers, key=len)  # the whole one; the first elides fields
    return result


def shape(value: Any) -> Any:
    """The field names of an answer, nested objects included."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return None


async def test_the_example_answer_has_the_fields_of_a_real_one(make_api: MakeAPI) -> None:
    api = await make_api()
    api.broker.queue("orders", 120, 4096)
    await api.poll()
    stored = await api.client.put("/queues/%2F/orders/flow", json={
        "qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500})
    assert stored.status_code == 200
    answer = await api.client.get("/flow/orders", headers={
        "X-Producer-Id": "batch-7", "X-Producer-Capacity": "50"})
    example = example_answer()
    real = answer.json()
    assert shape(example) == shape(real)
    for key in ("thresholds", "sources", "depth", "flowStopped", "limits"):
        assert example[key] == real[key], key


MANAGEMENT = "http://127.0.0.1:15672/"


class Curl:
    """One `curl` to the sidecar on a page, as curl would send it."""

    def __init__(self, page: str, words: list[str]) -> None:
        self.page = page
        self.headers: dict[str, str] = {}
        self.body: str | None = None
        self.method = "GET"
        urls = []
        options = iter(words[1:])
        for word in options:
            if word == "-X":
                self.method = next(options)
            elif word == "-H":
                name, _, value = next(options).partition(":")
                self.headers[name.strip()] = value.strip()
            elif word == "-d":
                self.body = next(options)
                if self.method == "GET":
                    self.method = "POST"
                # what curl sends unless told otherwise
                self.headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
            elif word.startswith("http"):
                urls.append(word)
        assert len(urls) == 1 and urls[0].startswith("http://127.0.0.1:8080/"), words
        self.url = urls[0]
        self.path = urlsplit(self.url).path

    def __repr__(self) -> str:
        return f"{self.page}: curl -X {self.method} {self.url}"


def curl_commands() -> list[Curl]:
    """Every `curl` to the sidecar in the pages' shell blocks (not those that declare a
    queue through RabbitMQ's management API first)."""
    return [Curl(name, words) for name, words in shell_lines(PAGES)
            if words and words[0] == "curl" and not any(MANAGEMENT in w for w in words)]


def route_of(method: str, path: str, routes: set[tuple[str, str]]) -> bool:
    for known_method, template in routes:
        pattern = re.escape(template).replace(re.escape("{}"), "[^/]+")
        if known_method == method and re.fullmatch(pattern, path):
            return True
    return False


def test_the_pages_show_curl_commands() -> None:
    commands = curl_commands()
    assert len(commands) >= 8
    assert any(c.body is not None for c in commands)


async def test_every_curl_on_a_page_calls_a_route(api: InProcessAPI) -> None:
    served = await schema_routes(api)
    assert [c for c in curl_commands() if not route_of(c.method, c.path, served)] == []


async def test_every_curl_on_a_page_is_answered(make_api: MakeAPI) -> None:
    """Sent as curl sends it (a body without a Content-Type header goes as a form), to a
    sidecar that knows the queues the pages name, started as they say (a loopback
    webhook target needs `--webhook-allow-private`): every one succeeds."""
    api = await make_api(webhook_allow_private=True)
    for queue in ("orders", "tour"):
        api.broker.queue(queue, 120, 4096)
    await api.poll()
    answers = []
    for curl in curl_commands():
        answer = await api.client.request(curl.method, curl.url, headers=curl.headers,
                                          content=curl.body)
        answers.append((repr(curl), answer.status_code, answer.text[:200]))
    failed = [a for a in answers if not 200 <= a[1] < 300]
    assert failed == [], "\n".join(map(str, failed))
