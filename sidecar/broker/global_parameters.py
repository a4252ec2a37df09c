"""RabbitMQ global runtime parameters: small JSON values kept in the cluster's own replicated
metadata, where flow-sidecar replicas share their settings (see `sidecar.cluster`).

`GET /api/global-parameters` lists every parameter of the cluster in one answer, so one
request per poll reads all the shared state. `PUT /api/global-parameters/{name}` takes any
JSON value. The management API turns each name into an Erlang atom: names are at most 255
characters and are never freed by the broker, which is why callers name per-queue values by
a fixed-length digest (`sidecar.cluster.shared_view`). Needs a user with the `policymaker`
(or `administrator`) tag. Blocking I/O: called from worker threads, never the event loop.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sidecar.broker import BrokerError
from sidecar.broker.failover import ManagementHttp, NoNodeAnswers


class GlobalParameters:
    """Read and write the cluster's global parameters through any of its nodes."""

    def __init__(self, http: ManagementHttp) -> None:
        self.http = http

    def read(self, prefix: str) -> dict[str, Any]:
        """{name: value} of every parameter whose name starts with `prefix`."""
        body = self.http.get_json("/api/global-parameters")
        if not isinstance(body, list):
            raise BrokerError("GET /api/global-parameters: unexpected answer shape")
        return {str(p["name"]): p.get("value") for p in body
                if isinstance(p, dict) and str(p.get("name", "")).startswith(prefix)}

    def put(self, name: str, value: Any) -> None:
        """Create or replace one parameter."""
        self._call("PUT", self._path(name), json={"name": name, "value": value},
                   expect=(201, 204))

    def delete(self, name: str) -> None:
        """Remove one parameter (one that is not there is not an error)."""
        self._call("DELETE", self._path(name), expect=(204, 404))

    @staticmethod
    def _path(name: str) -> str:
        return "/api/global-parameters/" + quote(name, safe="")

    def _call(self, method: str, path: str, *, expect: tuple[int, ...],
              json: Any = None) -> Any:
        try:
            response = self.http.request(method, path, json=json)
        except NoNodeAnswers as exc:
            raise BrokerError(f"{method} {path}: {exc}") from None
        if response.status_code not in expect:
            raise BrokerError(f"{method} {path}: HTTP {response.status_code}")
        return response
