"""The poll loop: read every queue and the broker's alarms, feed the engine, on a fixed cadence.

The broker read is blocking I/O (`requests`) and runs in a worker thread; applying its
result runs on the event loop, where `/flow` is served, so the in-memory table needs no
locks. A read that fails or hangs changes no flow state: while it is outstanding the loop
keeps ageing the data every interval, so `stale` and `--on-stale` take effect on time even
when the broker never answers, and a read still running after `read_deadline` is reported
as a failed poll (logged, `lastPollError`) while it goes on. The alarms are one more small
read after the queues; when it fails the last known alarms stay in force and the queues
are applied all the same.
A read that succeeds but carries no depth or no alarms (statistics off on the broker) is
noticed by `DataGaps`: logged once as an ERROR, shown by /healthz and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sidecar.broker import BrokerAdapter, BrokerError, ReportsVhostQuotas
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.collector import settle_long_lived
from sidecar.flow.data_gaps import DataGaps
from sidecar.flow.engine import FlowEngine
from sidecar.flow.slices import Steps, give_way, in_slices
from sidecar.model import QueueInfo

log = logging.getLogger("flow_sidecar.poller")
# the longest a poll's work holds the event loop at a time, give or take a step of SLICE
# queues: a `/flow` request waits for at most one (docs/benchmarks.md#slices-of-the-polls-work)
SLICE_SECONDS = 0.001


@dataclass(frozen=True)
class BrokerRead:
    """One cycle's reads: every queue, and each node's alarms or why they are unknown."""

    queues: list[QueueInfo]
    nodes: dict[str, NodeStatus] | None
    nodes_error: str | None = None
    quotas: dict[str, dict[str, int]] | None = None  # a broker's own vhost quotas
    sent_at: float | None = None  # when the queues' first request was sent


class PollCompanion(Protocol):
    """Something else read from the broker on every poll, just before its queues (the
    shared state of replicas: `sidecar.cluster`)."""

    def read(self) -> None:
        """Blocking read, in the poll's worker thread; must not raise."""
        ...

    def apply(self, now: float) -> None:
        """Apply what `read` got, on the event loop, before the queues are applied."""
        ...


class Poller:
    """Runs `adapter.fetch_queues()` every `interval` seconds and applies the result."""

    def __init__(
        self,
        adapter: BrokerAdapter,
        engine: FlowEngine,
        interval: float,
        *,
        read_deadline: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.adapter = adapter
        self.engine = engine
        self.interval = interval
        # a read still running after this long is reported as a failed poll (lastPollError)
        self.read_deadline = read_deadline
        self.clock = clock
        self.cycles = 0
        self.errors = 0  # polls that failed, ever (the engine counts consecutive ones)
        self.last_cycle_seconds: float | None = None
        # after each poll; a hook may give its work back as slices (`sidecar.flow.slices`)
        self.on_snapshot: list[Callable[[list[QueueInfo], float], Steps[None] | None]] = []
        self.companions: list[PollCompanion] = []
        self.gaps = DataGaps(engine.stale_after)

    async def run(self) -> None:
        """Poll until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.poll_once()
            except Exception:  # e.g. the disk is full: log, keep serving, try again
                self.errors += 1
                log.exception("poll cycle failed; retrying next interval")
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def poll_once(self) -> None:
        """One cycle: fetch in a thread, age data while waiting, apply on the loop."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        fetch = asyncio.ensure_future(asyncio.to_thread(self._read))
        overdue = False
        while not fetch.done():
            await asyncio.wait({fetch}, timeout=self.interval)
            if fetch.done():
                break
            self.engine.refresh_staleness(self.clock())
            if not overdue and loop.time() - started > self.read_deadline:
                overdue = True  # said once; the read goes on, and counts when it ends
                self.errors += 1
                self.engine.poll_failed(f"the broker read is still running after "
                                        f"{self.read_deadline:g} s", self.clock())
        try:
            read = fetch.result()
        except BrokerError as exc:
            self.errors += 1
            self.engine.poll_failed(str(exc), self.clock())
        except Exception as exc:  # an adapter bug must not end the loop
            log.exception("broker poll crashed")
            self.errors += 1
            self.engine.poll_failed(f"{type(exc).__name__}: {exc}", self.clock())
        else:
            now = self.clock()
            if self.engine.last_poll_error is not None:
                log.info("broker poll recovered after %d failures", self.engine.poll_failures)
            for companion in self.companions:
                companion.apply(now)
            self.engine.broker_wide.read_alarms(read.nodes, now, read.nodes_error)
            if read.quotas is not None:
                self.engine.broker_wide.read_broker_quotas(read.quotas, now)
            await in_slices(self.engine.apply_poll_in_slices(read.queues, now, read.sent_at),
                            SLICE_SECONDS)
            await give_way()  # a walk of every queue in one go (about a millisecond)
            self._watch_gaps(read, now)
            for hook in self.on_snapshot:
                # each hook walks every queue: let /flow be answered between them, and
                # within those that give their work in slices (`sidecar.flow.slices`)
                await give_way()
                try:
                    steps = hook(read.queues, now)
                    if steps is not None:
                        await in_slices(steps, SLICE_SECONDS)
                except Exception:
                    log.exception("snapshot hook failed")
        if self.cycles == 0 and self.engine.polled_once:
            settle_long_lived()
        self.cycles += 1
        self.last_cycle_seconds = loop.time() - started

    def _watch_gaps(self, read: BrokerRead, now: float) -> None:
        """Feed the gap watch; log a gap once when it begins and once when it ends."""
        self.gaps.observe_queues(read.queues, now)
        self.gaps.observe_nodes(read.nodes, now)
        began, ended = self.gaps.news(now)
        for problem in began:
            log.error("broker data missing: %s", problem.text)
        for gap in ended:
            log.info("broker data missing no more: the broker reports %s again", gap)

    def _read(self) -> BrokerRead:
        """The blocking reads of one cycle (in a worker thread): the companions (shared
        state), the queues, which must succeed, then the alarms, which may fail on their own."""
        for companion in self.companions:
            companion.read()
        sent_at = self.clock()  # the queues' figures describe no earlier moment (less lag)
        queues = self.adapter.fetch_queues()
        quotas = (self.adapter.vhost_quotas()
                  if isinstance(self.adapter, ReportsVhostQuotas) else None)
        try:
            return BrokerRead(queues, self.adapter.fetch_alarms(), quotas=quotas,
                              sent_at=sent_at)
        except BrokerError as exc:
            return BrokerRead(queues, None, str(exc), quotas, sent_at)
