"""The broker's exchanges and bindings, fetched on demand and kept for one poll interval.

Only producers that publish through an exchange need bindings, so they are not read on
every poll; the first exchange flow request of a poll interval refreshes them (one fetch
at a time, whatever the number of concurrent requests). A failed refresh keeps serving
the last topology it had, and is not tried again before `max_age` has passed, so requests
do not queue up behind one broker timeout after another.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sidecar.broker import BrokerAdapter, BrokerError
from sidecar.signals.exchange_routing import Topology

log = logging.getLogger("flow_sidecar.bindings")


class TopologyCache:
    """Bindings of the broker, at most `max_age` seconds old when the broker answers."""

    def __init__(self, adapter: BrokerAdapter, max_age: float) -> None:
        self.adapter = adapter
        self.max_age = max_age
        self._topology: Topology | None = None
        self._error: BrokerError | None = None
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Topology:
        """The current topology; BrokerError only when none was ever read."""
        async with self._lock:
            now = time.monotonic()
            if self._fetched_at is None or now - self._fetched_at > self.max_age:
                try:
                    self._topology = await asyncio.to_thread(self.adapter.fetch_topology)
                    self._error = None
                except BrokerError as exc:
                    self._error = exc
                except Exception as exc:  # noqa: BLE001 (an adapter's bug on an odd answer: no 500)
                    error = BrokerError(f"unreadable answer ({type(exc).__name__}: {exc})")
                    if str(error) != str(self._error):  # once, not once a poll interval
                        log.warning("reading the broker's bindings failed: %s", error)
                    self._error = error
                # not on cancellation: the next request must try again at once
                self._fetched_at = time.monotonic()
            if self._topology is None:
                raise self._error or BrokerError("the broker's bindings were never read")
            return self._topology
