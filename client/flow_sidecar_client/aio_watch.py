"""The asyncio publishers' view of the sidecar: one HTTP client per sidecar and event loop,
and one long poll per destination however many publishers of the process send to it.

A process may hold thousands of publishers (one per task, per tenant, per stream); a long
poll each would park thousands of requests in the sidecar for one answer. So publishers of
one destination join a `SharedWatch`, kept in a process-wide registry keyed by event loop,
sidecar URL and destination: one request parked at a time (`?since=VERSION&wait=...`),
registered as one producer whose `X-Producer-Capacity` is the members' summed windows (the
sidecar's `overflowRisk` check counts them all; a new sum is told within TELL_AFTER s).
The knowledge and its log lines are `watch_state`'s, as in the blocking publisher; the
outage policy (`outage`) is applied by each publisher to its own window. Needs the `aio`
extra (httpx).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import quote

import httpx

from flow_sidecar_client.api import producer_auth
from flow_sidecar_client.credit import grant_headers, grant_query
from flow_sidecar_client.credit_ledger import Reply
from flow_sidecar_client.flowwatch import LEAVE_TIMEOUT, REQUEST_MARGIN, suggested_rate
from flow_sidecar_client.outage import RETRY_FIRST, RETRY_MAX, Contact, OnUnreachable
from flow_sidecar_client.send_pacing import PACED_POLL, SendPacing
from flow_sidecar_client.watch_state import WatchState

log = logging.getLogger("flow_sidecar.client")

_sidecars: dict[tuple[int, str], AsyncSidecar] = {}
#: Seconds after publishers join or leave that the watch tells the sidecar their new sum.
TELL_AFTER = 1.0



def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail) if detail is not None else response.text.strip()[:200]


class AsyncSidecar:
    """One sidecar as this event loop's publishers see it: an HTTP client and the watches."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.url, headers=producer_auth(),
                                      limits=httpx.Limits(max_keepalive_connections=20))
        self.watches: dict[tuple[str, str | None, bool], SharedWatch] = {}
        self.users = 0

    async def post(self, path: str, body: dict[str, Any], timeout: float, producer_id: str,
                   routing_key: str | None) -> Reply:
        """A grant request (credit_ledger.Reply, as the blocking client's)."""
        target = path + (grant_query(routing_key) if path != "/grants/release" else "")
        try:
            response = await self.http.post(target, json=body, timeout=timeout,
                                            headers=grant_headers(producer_id))
        except httpx.HTTPError as exc:
            return Reply(None, None, f"cannot reach flow-sidecar at {self.url}: "
                                     f"{type(exc).__name__}")
        try:
            decoded = response.json()
        except ValueError:
            decoded = None
        return Reply(response.status_code, decoded if isinstance(decoded, dict) else None)

    async def release(self) -> None:
        """One user fewer; the last closes the client."""
        self.users -= 1
        if self.users == 0:
            _sidecars.pop((id(asyncio.get_running_loop()), self.url), None)
            await self.http.aclose()


def sidecar(url: str) -> AsyncSidecar:
    """This event loop's client of the sidecar at `url`, shared; `release()` when done."""
    key = (id(asyncio.get_running_loop()), url.rstrip("/"))
    found = _sidecars.get(key)
    if found is None:
        found = _sidecars[key] = AsyncSidecar(url)
    found.users += 1
    return found


class SharedWatch:
    """The flow state of one destination for every publisher of this loop that sends to it."""

    def __init__(self, owner: AsyncSidecar, path: str, routing_key: str | None,
                 destination: str, producer_id: str, *, poll_wait: float,
                 on_unreachable: OnUnreachable, grace: float, pacing: bool = False) -> None:
        self.owner, self.path, self.routing_key = owner, path, routing_key
        self.producer_id = producer_id
        self.poll_wait = min(poll_wait, PACED_POLL) if pacing else poll_wait
        # pacing: the members' sends, reported, spaced together at the offered rate
        self.pacing = SendPacing() if pacing else None
        self.published = 0
        self.state = WatchState(destination, on_unreachable=on_unreachable, grace=grace)
        self.capacity = self.members = 0  # the members' summed windows, and how many
        self._change = asyncio.Event()
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._told = 0  # the capacity the sidecar was last told
        self._telling: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def contact(self) -> Contact:
        return self.state.contact()

    def opened(self) -> None:
        self.state.opened()

    async def joined(self, capacity: int) -> None:
        """A publisher of `capacity` joins; returns once the watch has a first answer (or
        none came), so that its first message already obeys the sidecar."""
        self.members += 1
        self.capacity += capacity
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"flow-watch {self.path}")
        self._tell_soon()
        await self._first.wait()

    async def left(self, capacity: int) -> None:
        """A publisher leaves; the last one ends the poll and tells the sidecar."""
        self.members -= 1
        self.capacity -= capacity
        if self.members or self._task is None:
            self._tell_soon()
            return
        self.owner.watches.pop((self.path, self.routing_key, self.pacing is not None), None)
        if self._telling is not None:
            self._telling.cancel()
        for task in (self._task, *self._tasks):
            task.cancel()
        await asyncio.gather(self._task, *self._tasks, return_exceptions=True)
        try:
            await self.owner.http.delete(f"/producers/{quote(self.producer_id, safe='')}",
                                         timeout=LEAVE_TIMEOUT)
        except httpx.HTTPError as exc:
            log.debug("could not tell flow-sidecar that %s left: %s", self.producer_id, exc)

    async def changed(self, timeout: float) -> None:
        """Wait until the state changes, or `timeout` seconds."""
        change = self._change
        try:
            await asyncio.wait_for(change.wait(), timeout)
        except TimeoutError:
            pass

    def paced_for(self) -> float:
        """Seconds the members' next send must wait for the offered rate (0: now)."""
        return 0.0 if self.pacing is None else self.pacing.wait(time.monotonic())

    def sent(self) -> None:
        """A member sent a message: counted for the reports, a token spent."""
        self.published += 1
        if self.pacing is not None:
            self.pacing.sent(time.monotonic())

    def _tell_soon(self) -> None:
        """The members' summed window changed: within TELL_AFTER s, say it in a request
        that does not wait (one however many join or leave meanwhile; the parked poll
        stays)."""
        if self._telling is None:
            self._telling = asyncio.get_running_loop().call_later(TELL_AFTER, self._tell)

    def _tell(self) -> None:
        self._telling = None
        if self.capacity != self._told and self.members:
            task = asyncio.create_task(self._told_now())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _told_now(self) -> None:
        await self._poll(None)
        self._notify()

    def _notify(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    async def _poll(self, wait: float | None) -> bool:
        """One request (parked when `wait`); its answer updates the state."""
        params = {"routing_key": self.routing_key} if self.routing_key is not None else {}
        if self.state.version is not None and wait:
            params.update(since=str(self.state.version), wait=f"{wait:g}")
        self._told = self.capacity
        headers = {"X-Producer-Id": self.producer_id, "X-Producer-Capacity": str(self.capacity)}
        if self.pacing is not None:
            headers["X-Producer-Published"] = str(self.published)
        try:
            response = await self.owner.http.get(self.path, params=params, headers=headers,
                                                 timeout=(wait or 0) + REQUEST_MARGIN)
        except httpx.HTTPError as exc:
            self.state.failed(f"cannot reach flow-sidecar at {self.owner.url}: "
                              f"{type(exc).__name__}", None, time.monotonic())
            return False
        if response.status_code >= 400:
            self.state.failed(f"GET {self.path}: {response.status_code}: {_detail(response)}",
                              response.status_code, time.monotonic())
            return False
        try:
            answer = response.json()
        except ValueError:
            answer = None
        answer = answer if isinstance(answer, dict) else {}
        if self.pacing is not None:
            self.pacing.offered(suggested_rate(answer), time.monotonic())
        return self.state.answered(answer, time.monotonic())

    async def _run(self) -> None:
        retry = RETRY_FIRST
        wait: float | None = None  # the first answer at once
        while True:
            ok = await self._poll(wait)
            self._notify()
            self._first.set()
            if ok:
                retry, wait = RETRY_FIRST, self.poll_wait
            else:
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX)


def shared_watch(owner: AsyncSidecar, path: str, routing_key: str | None, destination: str,
                 producer_id: str, *, poll_wait: float, on_unreachable: OnUnreachable,
                 grace: float, pacing: bool = False) -> SharedWatch:
    """The watch of `path` (+ `routing_key`) at `owner`, made on first use; paced
    publishers share one of their own (one producer to the sidecar, one rate). The first
    publisher's `poll_wait`, `on_unreachable` and grace period are the watch's."""
    key = (path, routing_key, pacing)
    found = owner.watches.get(key)
    if found is None:
        found = owner.watches[key] = SharedWatch(
            owner, path, routing_key, destination, producer_id, poll_wait=poll_wait,
            on_unreachable=on_unreachable, grace=grace, pacing=pacing)
    return found
