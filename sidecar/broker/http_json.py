"""GET a JSON document from a broker's HTTP management API, with every failure a BrokerError.

Shared by the adapters that speak HTTP (RabbitMQ's management API, Broker-J's REST API):
one keep-alive `requests.Session`, connect/read timeouts, and the same error wording.
"""

from __future__ import annotations

from typing import Any

import requests

from sidecar.broker import BrokerError


def get_json(session: requests.Session, url: str, path: str,
             params: dict[str, Any] | None, timeout: tuple[float, float]) -> Any:
    """The decoded body of `GET url+path`; BrokerError unless it is a 200 with JSON."""
    try:
        response = session.get(url + path, params=params, timeout=timeout)
    except requests.RequestException as exc:
        raise BrokerError(f"GET {path}: {type(exc).__name__}: {exc}") from None
    return json_of(path, response)


def json_of(path: str, response: requests.Response) -> Any:
    """The decoded body of the answer to `GET path`; BrokerError unless it is a 200 with
    JSON (one wording for every adapter, whatever sent the request)."""
    if response.status_code != 200:
        raise BrokerError(f"GET {path}: HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise BrokerError(f"GET {path}: answer is not JSON") from None
