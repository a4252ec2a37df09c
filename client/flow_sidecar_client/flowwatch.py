"""The publisher's view of one destination's flow state, kept current by long-poll.

A producer must not ask the sidecar before every message: at thousands of messages a
second that is thousands of requests, and each answer is already out of date by the
broker's statistics lag. Instead one daemon thread per publisher parks
`GET ...?since=VERSION&wait=SECONDS` in the sidecar, which answers as soon as the
destination's `version` changes (or the wait ends), and the publisher reads the last
answer from memory. Every request carries `X-Producer-Id` and `X-Producer-Capacity`, so
the sidecar counts the producer's window in its `overflowRisk` check; `poll_wait` must stay
under the sidecar's producer ttl (60 s) for the producer to stay registered.

When the sidecar cannot answer (down, or 404/503 because it does not know the destination
yet) the signal is UNKNOWN and the publisher decides what that means (`on_unreachable`);
the watcher warns once per outage and says when the sidecar answers again.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import requests

from flow_sidecar_client.api import ApiError, FlowApi, producer_auth

log = logging.getLogger("flow_sidecar.client")

DEFAULT_EXCHANGE = "amq.default"
#: Seconds between attempts while the sidecar does not answer: doubling up to the max.
RETRY_FIRST, RETRY_MAX = 0.25, 2.0
#: Extra seconds a long-poll request may take beyond its `wait` before it counts as failed.
REQUEST_MARGIN = 10.0


class Signal(enum.Enum):
    """What the sidecar last said about the destination."""

    GO = "go"
    STOP = "stop"
    UNKNOWN = "unknown"


def blocks(signal: Signal, on_unreachable: str) -> bool:
    """Whether a publisher holds its messages: the destination is stopped, or the sidecar
    gives no answer and the publisher was told to block then (`on_unreachable="block"`)."""
    return signal is Signal.STOP or (signal is Signal.UNKNOWN and on_unreachable == "block")


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
               routing_key: str | None = None, capacity_bytes: int | None = None) -> Fetch:
    """A Fetch against a real sidecar that identifies the producer on every request."""
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


class FlowWatcher:
    """The last flow signal for one destination; see the module docstring."""

    def __init__(self, fetch: Fetch, destination: str, *, on_unreachable: str = "send",
                 poll_wait: float = 30.0, leave: Callable[[], None] | None = None) -> None:
        self.fetch = fetch
        self.leave = leave
        self.destination = destination
        self.on_unreachable = on_unreachable
        self.poll_wait = poll_wait
        self._signal = Signal.UNKNOWN
        self._version: int | None = None
        self._in_outage = False
        self._changed = threading.Condition()
        self._stopping = threading.Event()

    @property
    def signal(self) -> Signal:
        return self._signal

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
            self._changed.wait_for(lambda: ready(self._signal) or self._stopping.is_set(),
                                   timeout)
            return self._signal

    def poll_once(self, wait: float | None) -> bool:
        """One request; updates the signal. False when the sidecar gave no answer."""
        try:
            answer = self.fetch(self._version, wait)
            stopped, version = bool(answer["flowStopped"]), int(answer["version"])
        except ApiError as exc:
            return self._no_answer(str(exc))
        except (KeyError, TypeError, ValueError) as exc:
            return self._no_answer(f"unexpected answer: {type(exc).__name__}: {exc}")
        if self._stopping.is_set():
            return True
        self._set(Signal.STOP if stopped else Signal.GO, version)
        if self._in_outage:
            self._in_outage = False
            log.info("flow-sidecar answers again for %s; obeying flow control", self.destination)
        return True

    def _no_answer(self, reason: str) -> bool:
        if not self._stopping.is_set():
            self._set(Signal.UNKNOWN, None)
            self._note_outage(reason)
        return False

    def _set(self, signal: Signal, version: int | None) -> None:
        with self._changed:
            self._signal, self._version = signal, version
            self._changed.notify_all()

    def _note_outage(self, reason: str) -> None:
        if self._in_outage:
            return
        self._in_outage = True
        action = ("sending without flow control" if self.on_unreachable == "send"
                  else "holding messages")
        log.warning("flow-sidecar gives no flow state for %s (%s); %s until it answers",
                    self.destination, reason, action)

    def _run(self) -> None:
        retry = RETRY_FIRST
        while not self._stopping.is_set():
            if self.poll_once(self.poll_wait):
                retry = RETRY_FIRST
            else:
                self._stopping.wait(retry)
                retry = min(retry * 2, RETRY_MAX)
