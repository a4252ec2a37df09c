"""Management URLs in turn: the first that answers below 500 serves, and keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from api.main import load_settings
from sidecar.broker.failover import ManagementHttp, NoNodeAnswers


class Nodes:
    """A stand-in for requests.Session: each URL prefix answers a status or refuses."""

    def __init__(self, answers: dict[str, int | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.auth: Any = None

    def request(self, method: str, url: str, **_: Any) -> requests.Response:
        self.asked.append(url)
        status = next(s for prefix, s in self.answers.items() if url.startswith(prefix))
        if status is None:
            raise requests.ConnectionError("refused")
        response = requests.Response()
        response.status_code = status
        return response

    def close(self) -> None:
        pass


def http(nodes: Nodes, *urls: str) -> ManagementHttp:
    return ManagementHttp(urls, "u", "p", timeout=1.0, session=nodes)  # type: ignore[arg-type]


def test_a_refused_node_is_passed_over_and_the_next_one_kept() -> None:
    nodes = Nodes({"http://a": None, "http://b": 200, "http://c": 200})
    client = http(nodes, "http://a", "http://b", "http://c")
    assert client.request("GET", "/api/queues").status_code == 200
    assert client.request("GET", "/api/queues").status_code == 200
    assert nodes.asked == ["http://a/api/queues", "http://b/api/queues", "http://b/api/queues"]
    assert client.current_url == "http://b"


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_fails_over(status: int) -> None:
    nodes = Nodes({"http://a": status, "http://b": 200})
    assert http(nodes, "http://a", "http://b").request("GET", "/x").status_code == 200


@pytest.mark.parametrize("status", [401, 404])
def test_a_client_error_is_the_callers_not_a_reason_to_fail_over(status: int) -> None:
    nodes = Nodes({"http://a": status, "http://b": 200})
    assert http(nodes, "http://a", "http://b").request("GET", "/x").status_code == status
    assert nodes.asked == ["http://a/x"]


def test_the_search_wraps_around_from_the_current_node() -> None:
    nodes = Nodes({"http://a": 200, "http://b": None, "http://c": 200})
    client = http(nodes, "http://a", "http://b", "http://c")
    client.current = 1
    client.request("GET", "/x")
    assert nodes.asked == ["http://b/x", "http://c/x"]


def test_no_node_answers_names_each_without_credentials() -> None:
    nodes = Nodes({"http://user:secret@a": None, "http://b": 502})
    with pytest.raises(NoNodeAnswers) as failure:
        http(nodes, "http://user:secret@a", "http://b").request("GET", "/x")
    assert "secret" not in str(failure.value)
    assert "***@a: ConnectionError" in str(failure.value)
    assert "http://b: HTTP 502" in str(failure.value)


def test_management_url_may_be_given_more_than_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOW_MANAGEMENT_URL", raising=False)
    assert load_settings([]).management_url == ["http://127.0.0.1:15672"]
    assert load_settings(["--management-url", "http://a:15672", "--management-url",
                          "http://b:15672"]).management_url == ["http://a:15672",
                                                                 "http://b:15672"]
    monkeypatch.setenv("FLOW_MANAGEMENT_URL", "http://a:15672, http://b:15672")
    assert load_settings([]).management_url == ["http://a:15672", "http://b:15672"]
