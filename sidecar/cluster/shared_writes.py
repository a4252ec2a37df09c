"""Writes through the API when replicas share their state (`--shared-state broker`).

The broker's global parameters are the truth every replica reads (`sync.SharedSync`); this
replica's SQLite database is its cache, so that a restart while the broker is unreachable
still has every setting. A write therefore goes to the broker first, off the event loop
(`/flow` keeps answering while it waits), and then through the engine as a local write
would, which caches it and re-evaluates the queue in one transaction:

- the broker refuses or cannot be reached: StoreUnavailable (503), nothing changed anywhere;
- the local commit fails after the broker took the value (a full disk): the broker's
  previous value is put back and the write answers 503. Only if that too fails does the
  broker keep the new value, which every replica (this one included) then applies at its
  next poll: logged as an error, the one case where a 503 did change something.

Writes on one replica are serialised and counted in `generation`, odd while one is under
way: a poll's read of the shared state that overlapped a write is not applied (it could
undo the write here until the next poll).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

from sidecar.broker import BrokerError
from sidecar.broker.global_parameters import GlobalParameters
from sidecar.cluster.shared_outbox import SharedOutbox
from sidecar.cluster.shared_view import (
    DEFAULTS,
    defaults_value,
    settings_parameter,
    webhook_parameter,
)
from sidecar.flow.engine import FlowEngine, SettingsRejected, StoreUnavailable
from sidecar.flow.engine_writes import settings_problems
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueKey
from sidecar.signals.webhook_outbox import Subscription

log = logging.getLogger("flow_sidecar.cluster")
Undo = tuple[str, Any]  # (parameter name, value to put back; None: delete it)


class SharedWrites:
    """The `sidecar.settings_writes.Writes` of a replica sharing its state."""

    def __init__(self, engine: FlowEngine, outbox: SharedOutbox, params: GlobalParameters,
                 *, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.outbox = outbox
        self.params = params
        self.clock = clock
        self.generation = 0  # odd while a write is under way
        self._lock = asyncio.Lock()

    async def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        entry = self.engine.entry(key)
        problems = settings_problems(values, entry.limits if entry else None,
                                     self.engine.defaults)
        if problems:
            raise SettingsRejected(problems)
        name, value = settings_parameter(key, values)
        previous = self.engine.stored_settings(key)
        undo = (name, None if previous is None else settings_parameter(key, previous)[1])
        async with self._writing():
            await self._broker(self.params.put, name, value)
            await self._locally(lambda: self.engine.put_settings(key, values, now), undo)

    async def delete_settings(self, key: QueueKey, now: float) -> bool:
        previous = self.engine.stored_settings(key)
        if previous is None:
            return False
        name, value = settings_parameter(key, previous)
        async with self._writing():
            await self._broker(self.params.delete, name)
            await self._locally(lambda: self.engine.delete_settings(key, now), (name, value))
        return True

    async def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        if policy is not None and policy.problems():
            raise ValueError("; ".join(policy.problems()))
        current = self.engine.defaults
        undo = (DEFAULTS, None if current == self.engine.startup_defaults
                else defaults_value(current))
        async with self._writing():
            if policy is None:
                await self._broker(self.params.delete, DEFAULTS)
            else:
                await self._broker(self.params.put, DEFAULTS, defaults_value(policy))
            await self._locally(lambda: self.engine.set_defaults(policy, now), undo)

    async def create_webhook(self, *, url: str, secret: str, vhost: str,
                             queue: str, warnings: bool = False) -> Subscription:
        sub = Subscription(f"wh_{uuid.uuid4().hex[:16]}", url, secret, vhost, queue, True,
                           None, self.clock(), warnings)
        await self._save(sub, None)
        return sub

    async def delete_webhook(self, sub_id: str) -> bool:
        sub = self.outbox.get(sub_id)
        if sub is None:
            return False
        name, value = webhook_parameter(sub)
        async with self._writing():
            await self._broker(self.params.delete, name)
            await self._locally(lambda: self.outbox.delete(sub_id), (name, value))
        return True

    async def enable_webhook(self, sub_id: str) -> Subscription | None:
        return await self.set_webhook_enabled(sub_id, True, None)

    async def set_webhook_enabled(self, sub_id: str, enabled: bool,
                                  reason: str | None) -> Subscription | None:
        """Enable, or disable with a reason (the delivering replica, on a 410)."""
        sub = self.outbox.get(sub_id)
        if sub is None:
            return None
        changed = replace(sub, enabled=enabled, disabled_reason=None if enabled else reason)
        await self._save(changed, sub)
        return changed

    async def _save(self, sub: Subscription, previous: Subscription | None) -> None:
        name, value = webhook_parameter(sub)
        async with self._writing():
            await self._broker(self.params.put, name, value)
            await self._locally(lambda: self.outbox.save(sub), (
                name, None if previous is None else webhook_parameter(previous)[1]))

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        async with self._lock:
            self.generation += 1
            try:
                yield
            finally:
                self.generation += 1

    async def _broker(self, call: Callable[..., None], *args: Any) -> None:
        try:
            await asyncio.to_thread(call, *args)
        except BrokerError as exc:
            log.error("a write to the cluster's shared state failed (%s); nothing was "
                      "changed", exc)
            raise StoreUnavailable(f"the cluster's shared state could not be written: "
                                   f"{exc}") from None

    async def _locally(self, write: Callable[[], object], undo: Undo) -> None:
        """Run the local half of a write; if it fails, put the broker's value back."""
        try:
            write()
        except Exception as exc:
            name, value = undo
            try:
                if value is None:
                    await asyncio.to_thread(self.params.delete, name)
                else:
                    await asyncio.to_thread(self.params.put, name, value)
            except BrokerError as undo_failed:
                log.error("the local commit of a shared write failed and the broker's "
                          "previous value of %s could not be put back (%s): every replica "
                          "applies the new value at its next poll", name, undo_failed)
            if isinstance(exc, (StoreUnavailable, SettingsRejected, ValueError)):
                raise
            raise StoreUnavailable(f"the settings cache could not commit: {exc}") from exc
