"""An asyncio publisher's credit grants: `credit_ledger`'s accounting (the blocking
publisher's, shared) kept topped up by a task instead of a thread. Needs the `aio` extra."""

from __future__ import annotations

import asyncio
import time

from flow_sidecar_client.aio_watch import AsyncSidecar
from flow_sidecar_client.credit_ledger import ASK_WAIT, REQUEST_MARGIN, CreditLedger, GrantsMode


class AsyncCreditLine(CreditLedger):
    """Credit for one publisher and destination; everything runs on the event loop."""

    def __init__(self, owner: AsyncSidecar, path: str, routing_key: str | None,
                 producer_id: str, capacity: int, destination: str, *,
                 mode: GrantsMode = "auto", producer_class: str | None = None) -> None:
        super().__init__(capacity, destination, mode, time.monotonic)
        self.owner = owner
        self.path = path
        self.routing_key = routing_key
        self.producer_id = producer_id
        self.producer_class = producer_class
        self._due = asyncio.Event()     # the task: look at `due` again
        self._news = asyncio.Event()    # senders: credit may have come
        self.wake = self._woken
        self._task: asyncio.Task[None] | None = None

    def _woken(self) -> None:
        self._due.set()
        self._news.set()

    def start(self) -> AsyncCreditLine:
        if self.mode != "off":
            self._task = asyncio.create_task(self._run(), name=f"flow-credit {self.path}")
        return self

    async def wait(self, timeout: float) -> None:
        """Until credit may have come (or `timeout` seconds)."""
        if self.starved and not self.stopping:
            self._news.clear()
            try:
                await asyncio.wait_for(self._news.wait(), timeout)
            except TimeoutError:
                pass

    async def close(self, timeout: float = ASK_WAIT + 0.5) -> None:
        """Stop asking and give back what is held; at most `timeout` seconds."""
        self.stopping = True
        self._woken()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout)
            except TimeoutError:
                pass  # what a hung sidecar still holds ends with its lease

    async def _post(self, path: str, body: dict[str, object], timeout: float) -> None:
        sent_at = self.clock()
        reply = await self.owner.post(path, body, timeout, self.producer_id, self.routing_key,
                                      self.producer_class)
        if path != "/grants/release":
            self.answered(reply, sent_at)

    async def _run(self) -> None:
        while True:
            while not self.due():
                self._due.clear()
                try:
                    await asyncio.wait_for(self._due.wait(), self.next_check())
                except TimeoutError:
                    pass
            stopping = self.stopping
            ask = self.next_ask()
            if ask.want > 0:
                await self._post(self.path, ask.body(), ASK_WAIT + REQUEST_MARGIN)
            elif ask.give_back:
                await self._post("/grants/release", {"grants": ask.give_back}, REQUEST_MARGIN)
            if stopping:
                return
