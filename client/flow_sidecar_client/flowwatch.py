"""The publisher's view of one destination's flow state, kept current by long-poll.

A producer must not ask the sidecar before every message: at thousands of messages a
second that is thousands of requests, and each answer is already out of date by the
broker's statistics lag. Instead one daemon thread per publisher parks
`GET ...?since=VERSION&wait=SECONDS` in the sidecar, which answers as soon as the
destination's `version` changes (or the wait ends), and the publisher reads the last
answer from memory. Every request carries `X-Producer-Id` and `X-Producer-Capacity`, so
the sidecar counts the producer's window in its `overflowRisk` check; `poll_wait` must stay
under the sidecar's producer ttl (60 s) for the producer to stay registered.

When the sidecar cannot answer (down, restarting: no answer or a 5xx) the signal is
UNKNOWN, the last one known is kept, and the outage policy (`outage`) decides what the
publisher does; a 4xx (a destination it does not know) leaves it to `on_unreachable`. The
bookkeeping and its log lines are `watch_state`, shared with the asyncio publishers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import requests

from flow_sidecar_client.api import ApiError, FlowApi, producer_auth
from flow_sidecar_client.outage import DEFAULT_GRACE, RETRY_FIRST, RETRY_MAX, Contact, OnUnreachable
from flow_sidecar_client.watch_state import Signal, WatchState

log = logging.getLogger("flow_sidecar.client")

DEFAULT_EXCHANGE = "amq.default"
#: Extra seconds a long-poll request may take beyond its `wait` before it counts as failed.
REQUEST_MARGIN = 10.0


#: (since, wait) -> the sidecar's answer; raises ApiError when there is none.
Fetch = Callable[[int | None, float | None], dict[str, Any]]


def queue_flow_path(vhost: str, queue: str) -> str:
    """`/flow/{vhost}/{queue}`, each name percent-encoded as the API expects."""
    return f"/flow/{quote(vhost, safe='')}/{quote(queue, safe='')}"


def exchange_flow_path(vhost: str, exchange: str) -> str:
    """`/flow/exchange/{vhost}/{exchange}`; the default exchange is named `amq.default`."""
    return f"/flow/exchange/{quote(vhost, safe='')}/{quote(exchange or DEFAULT_EXCHANGE, safe='')}"


#: Seconds `close()` gives the sidecar to take note that the producer left.
LEAVE_TIMEOUT = 2.0


def http_fetch(url: str, path: str, producer_id: str, capacity: int,
               routing_key: str | None = None, capacity_bytes: int | None = None,
               published: Callable[[], int] | None = None) -> Fetch:
    """A Fetch against a real sidecar that identifies the producer on every request (and
    reports `published()`, its count of messages sent so far, when given: pacing)."""
    session = requests.Session()
    session.headers.update({"X-Producer-Id": producer_id,
                            "X-Producer-Capacity": str(capacity), **producer_auth()})
    if capacity_bytes is not None:
        session.headers["X-Producer-Capacity-Bytes"] = str(capacity_bytes)
    api = FlowApi(url, session=session)

    def fetch(since: int | None, wait: float | None) -> dict[str, Any]:
        params = {"routing_key": routing_key} if routing_key is not None else {}
        if since is not None and wait:
            params.update(since=str(since), wait=f"{wait:g}")
        api.timeout = (wait or 0) + REQUEST_MARGIN
        if published is not None:
            session.headers["X-Producer-Published"] = str(published())
        answer: dict[str, Any] = api.request("GET", path, params=params)
        return answer

    return fetch


def http_leave(url: str, producer_id: str) -> Callable[[], None]:
    """Tells a real sidecar that the producer left (`DELETE /producers/{id}`), so its window
    stops counting at once rather than after the sidecar's producer ttl. Best effort: a
    sidecar that is down or older has nothing to forget, or forgets it by the ttl."""
    api = FlowApi(url, timeout=LEAVE_TIMEOUT)
    api.http.headers.update(producer_auth())

    def leave() -> None:
        try:
            api.request("DELETE", f"/producers/{quote(producer_id, safe='')}")
        except ApiError as exc:
            log.debug("could not tell flow-sidecar that %s left: %s", producer_id, exc)

    return leave


def suggested_rate(answer: dict[str, Any]) -> float | None:
    """The answer's `suggestedRate` (messages/s; present while the queue is paced)."""
    rate = answer.get("suggestedRate")
    return float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else None


class FlowWatcher:
    """The last flow signal for one destination; see the module docstring."""

    def __init__(self, fetch: Fetch, destination: str, *, on_unreachable: OnUnreachable = None,
                 poll_wait: float = 30.0, leave: Callable[[], None] | None = None,
                 grace: float = DEFAULT_GRACE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch = fetch
        self.leave = leave
        self.destination = destination
        self.poll_wait = poll_wait
        self.clock = clock
        self.state = WatchState(destination, on_unreachable=on_unreachable, grace=grace)
        self.suggested_rate: float | None = None  # of the last answer (pacing)
        self._changed = threading.Condition()
        self._stopping = threading.Event()

    @property
    def signal(self) -> Signal:
        return self.state.signal

    def contact(self) -> Contact:
        return self.state.contact()

    def opened(self) -> None:
        """A publisher fails open: the one WARNING of this outage."""
        with self._changed:
            self.state.opened()

    def start(self) -> FlowWatcher:
        """Ask once now, so the first message already obeys the sidecar, then keep polling."""
        self.poll_once(wait=None)
        threading.Thread(target=self._run, daemon=True,
                         name=f"flow-watch {self.destination}").start()
        return self

    def close(self) -> None:
        """Stop polling and tell the sidecar the producer left (`leave`, at most
        LEAVE_TIMEOUT s). A request parked in the sidecar is left to end on its own (at
        most `poll_wait` s); the sidecar ignores it for a producer that left, and so does
        this watcher."""
        first = not self._stopping.is_set()
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        if first and self.leave is not None:
            self.leave()

    def wait_until(self, ready: Callable[[Signal], bool], timeout: float) -> Signal:
        """Block until `ready(signal)` or `timeout` seconds pass; the signal then."""
        with self._changed:
            self._changed.wait_for(lambda: ready(self.state.signal) or self._stopping.is_set(),
                                   timeout)
            return self.state.signal

    def poll_once(self, wait: float | None) -> bool:
        """One request; updates the signal. False when the sidecar gave no answer."""
        try:
            answer = self.fetch(self.state.version, wait)
        except ApiError as exc:
            status = exc.status
            with self._changed:
                if not self._stopping.is_set():
                    self.state.failed(str(exc), status, self.clock())
                    self._changed.notify_all()
            return False
        with self._changed:
            if self._stopping.is_set():
                return True
            ok = self.state.answered(answer, self.clock())
            self.suggested_rate = suggested_rate(answer)
            self._changed.notify_all()
        return ok

    def _run(self) -> None:
        retry = RETRY_FIRST
        while not self._stopping.is_set():
            if self.poll_once(self.poll_wait):
                retry = RETRY_FIRST
            else:
                self._stopping.wait(retry)
                retry = min(retry * 2, RETRY_MAX)
