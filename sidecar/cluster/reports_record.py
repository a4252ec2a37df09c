"""This replica's record of the producer reports it heard (`flow-sidecar.reports.<id>`,
sidecar.cluster.shared_reports), written after a poll when it changed, off the event loop;
and the union of every live replica's records, adopted by the producer reports after each
shared read, so that every replica paces and ranks on the same reports.

A record covers the queues `due` names (paced ones, and those stopped within the minute
"who filled it" looks back): what this replica heard there, with what its own record held
when read (a former process's reports, until they age out), newest first. Records of
replicas counted as gone (no heartbeat) are ignored, as their credit records are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sidecar.broker import BrokerError
from sidecar.broker.global_parameters import GlobalParameters
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.shared_reports import Record, bounded, record_value, union
from sidecar.cluster.shared_view import REPORTS, SharedView
from sidecar.flow.engine import FlowEngine
from sidecar.model import QueueKey
from sidecar.records.filled_by import FilledBy
from sidecar.records.top_producers import WINDOW
from sidecar.signals.producer_reports import ProducerReports

log = logging.getLogger("flow_sidecar.cluster")
Due = Callable[[QueueKey, float], bool]


def paced_or_stopped(engine: FlowEngine, filled: FilledBy) -> Due:
    """Whether a queue's reports belong in the record at `now`: it is paced, or it stopped
    less than a minute ago."""
    def due(key: QueueKey, now: float) -> bool:
        entry, last = engine.entry(key), filled.last(key)
        return (entry is not None and entry.pacing.engaged) or (
            last is not None and now - last[0] <= WINDOW)
    return due


class ReportsRecord:
    """Writes this replica's record and adopts the union; see the module docstring."""

    def __init__(self, params: GlobalParameters, owners: GrantOwnership,
                 reports: ProducerReports, due: Due,
                 clock: Callable[[], float] = time.time) -> None:
        self.params = params
        self.owners = owners
        self.reports = reports
        self.due = due
        self.clock = clock
        self.writes = 0
        self._own: Record = {}  # this replica's record as last read
        self._written: Record | None = None
        self._writing: asyncio.Future[None] | None = None

    def observe(self, view: SharedView) -> None:
        """Sync hook, once the read's members are known: adopt the live replicas' union."""
        self._own = view.reports.get(self.owners.id, {})
        self.reports.adopt(union(view.reports, self.owners.members))

    def on_poll(self, _infos: object, now: float) -> None:
        """Poll hook: write the record if it changed, unless a write is under way."""
        if self._writing is not None and not self._writing.done():
            return
        own = {key: heard for key, heard in self._own.items() if self.due(key, now)}
        here = self.reports.heard(lambda key: self.due(key, now))
        record = bounded(union({"own": own, "here": here}, ("own", "here")), now)
        if record != self._written:
            self._writing = asyncio.ensure_future(asyncio.to_thread(self._put, record, now))

    def _put(self, record: Record, now: float) -> None:
        try:
            self.params.put(REPORTS + self.owners.id, record_value(record, now))
        except BrokerError as exc:
            log.warning("the producer reports could not be shared: %s; retried next poll",
                        exc)
            return
        self._written = record
        self.writes += 1
