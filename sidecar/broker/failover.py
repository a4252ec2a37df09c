"""Management API requests that fail over between the nodes of one RabbitMQ cluster.

Every node of a cluster serves the whole cluster's management API (queues, bindings,
global parameters of every node), so any one will do; `--management-url` given more than
once lists them. Requests go to the node that answered last; a node that refuses the
connection, times out or answers 5xx (a node that is stopping or still booting) is passed
over for the next one, in order, and the first that answers becomes the one to ask from
then on. A 4xx is the same on every node (credentials, a missing object) and is the
caller's to judge, not a reason to fail over.

A hung node costs one request timeout once, at the switch, not on every poll. A JSON answer
must arrive whole within four request timeouts: the read timeout alone bounds each wait
for a byte, so an answer trickling in could hold a poll for ever. URLs are logged without
credentials.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import requests
import urllib3

from sidecar.broker import BrokerError, SlowAnswer
from sidecar.broker.json_items import loads_in_items
from sidecar.redaction import redact_url

log = logging.getLogger("flow_sidecar.broker")
CHUNK = 1 << 16
DEADLINE_TIMEOUTS = 4  # a whole answer may take this many --request-timeout


class NoNodeAnswers(Exception):
    """Not one of the management URLs gave an answer (the message says why, per URL);
    `slow`: one of them timed out or failed with a 5xx, rather than refusing."""

    def __init__(self, message: str, slow: bool) -> None:
        super().__init__(message)
        self.slow = slow


class ManagementHttp:
    """One keep-alive session over the management URLs of one cluster."""

    def __init__(self, urls: Sequence[str], user: str, password: str, *, timeout: float,
                 session: requests.Session | None = None) -> None:
        if not urls:
            raise ValueError("at least one management URL is needed")
        self.urls = [url.rstrip("/") for url in urls]
        self.current = 0  # index of the URL that answered last
        self.timeout = (min(timeout, 3.0), timeout)  # (connect, read)
        self.deadline = DEADLINE_TIMEOUTS * timeout  # for a whole answer, once it started
        self.session = session or requests.Session()
        self.session.auth = (user, password)

    @property
    def current_url(self) -> str:
        """The URL requests go to now, fit for logs and answers."""
        return redact_url(self.urls[self.current])

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None, stream: bool = False, whole: bool = False
                ) -> requests.Response:
        """The first answer below 500, from the current URL or, failing that, the next ones
        in order; NoNodeAnswers when none gives one. `whole`: the broker builds the whole
        answer before its first byte (a listing of every queue), so the first byte may take
        as long as a whole answer may (four request timeouts)."""
        failures = []
        slow = False
        timeout = (self.timeout[0], self.deadline) if whole else self.timeout
        for step in range(len(self.urls)):
            index = (self.current + step) % len(self.urls)
            url = self.urls[index]
            try:
                response = self.session.request(method, url + path, params=params, json=json,
                                                timeout=timeout, stream=stream)
            except requests.RequestException as exc:
                failures.append(f"{redact_url(url)}: {type(exc).__name__}")
                slow = slow or isinstance(exc, requests.Timeout)
                continue
            if response.status_code >= 500:
                failures.append(f"{redact_url(url)}: HTTP {response.status_code}")
                slow = True
                continue
            if index != self.current:
                log.warning("management API: %s did not answer (%s); using %s from now on",
                            redact_url(self.urls[self.current]),
                            failures[0].partition(": ")[2], redact_url(url))
                self.current = index
            return response
        raise NoNodeAnswers("; ".join(failures), slow)

    def get_json(self, path: str, params: dict[str, Any] | None = None, *,
                 whole: bool = False) -> Any:
        """The decoded body of `GET path`; BrokerError unless a node answers 200 with JSON
        (one wording for every adapter that speaks a management API over HTTP). `whole`:
        as for `request`."""
        started = time.monotonic()
        try:
            response = self.request("GET", path, params=params, stream=True, whole=whole)
        except NoNodeAnswers as exc:
            raise (SlowAnswer if exc.slow else BrokerError)(f"GET {path}: {exc}") from None
        with response:
            if response.status_code != 200:
                raise BrokerError(f"GET {path}: HTTP {response.status_code}")
            body = self._body(response, path, started + self.deadline)
        try:
            return loads_in_items(body)  # not one call that holds the GIL: see there
        except ValueError:
            raise BrokerError(f"GET {path}: answer is not JSON") from None

    def _body(self, response: requests.Response, path: str, deadline: float) -> bytes:
        """The whole body, or BrokerError once `deadline` passes: the read timeout bounds
        each wait for a byte, not the answer, so one trickling a byte a second would
        hold a poll for ever."""
        chunks = []
        try:
            while chunk := response.raw.read1(CHUNK, decode_content=True):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise SlowAnswer(f"GET {path}: the answer took over {self.deadline:g} s "
                                      "(a broker or proxy trickling it)")
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise SlowAnswer(f"GET {path}: the answer broke off ({type(exc).__name__})"
                              ) from None
        return b"".join(chunks)

    def close(self) -> None:
        """Release the pooled connections."""
        self.session.close()
