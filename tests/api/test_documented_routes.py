"""docs/api.md against the app: its route table lists exactly the routes `/openapi.json`
describes (plus the few pages kept out of the schema, which must answer), and its example
`/flow` answer has exactly the fields a real answer has."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import InProcessAPI, MakeAPI
from tests.unit.test_docs import blocks

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
    examples = [json.loads(body) for language, body in blocks(API_PAGE.read_text())
                if language == "json"]
    answers = [e for e in examples if {"vhost", "queue", "version"} <= set(e)]
    assert len(answers) == 1
    result: dict[str, Any] = answers[0]
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
    assert shape(example) == shape(answer.json())
    real = answer.json()
    for key in ("thresholds", "sources", "depth", "flowStopped", "limits"):
        assert example[key] == real[key], key
