"""A small client of the sidecar's HTTP API, shared by `flow-config` and `flow-pipeline --apply`.

It turns transport failures and refusals into one `ApiError` with an operator-readable
message and an exit code, so every command reports them the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import requests

EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_AUTH = 1, 3, 4


class ApiError(Exception):
    """The sidecar refused a request or could not be reached."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED, status: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status


def queue_path(vhost: str, queue: str) -> str:
    """`/queues/{vhost}/{queue}` with each name percent-encoded as the API expects."""
    return f"/queues/{quote(vhost, safe='')}/{quote(queue, safe='')}"


def vhost_path(vhost: str) -> str:
    """`/vhosts/{vhost}` with the name percent-encoded."""
    return f"/vhosts/{quote(vhost, safe='')}"


def _detail(response: requests.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if detail is None:  # not a flow-sidecar answer (a proxy, or RabbitMQ's own API)
        return response.text.strip()[:200] or response.reason
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d)
                         for d in detail)
    return str(detail)


def stored_settings(view: dict[str, Any] | None) -> dict[str, float]:
    """The qpid.flow_* and flow.warning_* settings stored for a queue, from its view; {}
    when none are."""
    settings = (view or {}).get("settings") or {}
    return {k: v for k, v in settings.items() if v is not None}


def producer_auth() -> dict[str, str]:
    """The Authorization header a producer sends when the sidecar runs with
    `--producer-token`: the token comes from the producer's FLOW_PRODUCER_TOKEN."""
    token = os.environ.get("FLOW_PRODUCER_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


class FlowApi:
    """The sidecar's REST API."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0,
                 session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.http = session or requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, json: Any = None,
                params: dict[str, str] | None = None) -> Any:
        """Send one request; the decoded JSON answer, or ApiError."""
        try:
            response = self.http.request(method, self.url + path, json=json, params=params,
                                         timeout=self.timeout)
        except requests.RequestException as exc:
            raise ApiError(f"cannot reach flow-sidecar at {self.url}: {type(exc).__name__}",
                           EXIT_UNREACHABLE) from None
        if response.status_code == 401:
            raise ApiError(f"{self.url} refused the token: {_detail(response)}", EXIT_AUTH, 401)
        if response.status_code >= 400:
            raise ApiError(f"{method} {path}: {response.status_code}: {_detail(response)}",
                           EXIT_REFUSED, response.status_code)
        try:
            return response.json()
        except ValueError:  # e.g. --url points at RabbitMQ's own UI
            raise ApiError(f"{self.url} answered {method} {path} with something that is not "
                           "JSON: is that flow-sidecar?", EXIT_UNREACHABLE) from None

    def queues(self, vhost: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        params = {k: v for k, v in (("vhost", vhost), ("name", name)) if v is not None}
        result: list[dict[str, Any]] = self.request("GET", "/queues", params=params)
        return result

    def queue(self, vhost: str, queue: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", queue_path(vhost, queue))
        return result

    def put_flow(self, vhost: str, queue: str, values: Mapping[str, float]) -> dict[str, Any]:
        """Replace a queue's stored qpid.flow_* settings."""
        result: dict[str, Any] = self.request("PUT", queue_path(vhost, queue) + "/flow",
                                              json=values)
        return result

    def queue_or_none(self, vhost: str, queue: str) -> dict[str, Any] | None:
        """A queue's view, or None when neither the broker nor the store knows it."""
        try:
            return self.queue(vhost, queue)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def stored_flow(self, vhost: str, queue: str) -> dict[str, float]:
        """A queue's stored qpid.flow_* settings; {} when none are stored."""
        return stored_settings(self.queue_or_none(vhost, queue))

    def update_flow(self, vhost: str, queue: str, values: Mapping[str, float]) -> dict[str, Any]:
        """Change some of a queue's stored settings and keep the others (a PUT replaces
        all four keys)."""
        return self.put_flow(vhost, queue, {**self.stored_flow(vhost, queue), **values})

    def delete_flow(self, vhost: str, queue: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", queue_path(vhost, queue) + "/flow")
        return result

    def defaults(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/defaults")
        return result

    def put_defaults(self, values: dict[str, int]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("PUT", "/defaults", json=values)
        return result

    def reset_defaults(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", "/defaults")
        return result

    def vhosts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/vhosts")
        return result

    def vhost(self, vhost: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", vhost_path(vhost))
        return result

    def put_vhost(self, kind: str, vhost: str, values: Mapping[str, float]) -> dict[str, Any]:
        """Replace a vhost's `quota` or `defaults`."""
        result: dict[str, Any] = self.request("PUT", f"{vhost_path(vhost)}/{kind}",
                                              json=values)
        return result

    def delete_vhost(self, kind: str, vhost: str) -> dict[str, Any]:
        """Forget a vhost's `quota` or `defaults`."""
        result: dict[str, Any] = self.request("DELETE", f"{vhost_path(vhost)}/{kind}")
        return result

    def alarms(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/alarms")
        return result
