"""The writes an operator makes through the API: queue settings, defaults, webhook
subscriptions. One protocol, two homes for the truth:

- `LocalWrites`: this sidecar's own SQLite database (`--shared-state local`, the default);
- `sidecar.cluster.shared_writes.SharedWrites`: the broker's global parameters, shared by
  every replica (`--shared-state broker`), with the database as this replica's cache.

The routes only know the protocol. Every method keeps the engine's promise: a refused write
(SettingsRejected) or one that could not be stored (StoreUnavailable) changed nothing.
They are coroutines because a shared write waits for the broker, which must not hold up the
event loop that answers `/flow`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sidecar.flow.engine import FlowEngine
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueKey
from sidecar.signals.webhook_outbox import Subscription, WebhookOutbox


class Writes(Protocol):
    """What the API changes."""

    async def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        """Replace a queue's stored settings (SettingsRejected, StoreUnavailable)."""
        ...

    async def delete_settings(self, key: QueueKey, now: float) -> bool:
        """Forget a queue's stored settings; False when none were stored."""
        ...

    async def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        """Change the default percentages and limit (None: the start-up options)."""
        ...

    async def create_webhook(self, *, url: str, secret: str, vhost: str,
                             queue: str, warnings: bool = False) -> Subscription:
        """A new, enabled subscription."""
        ...

    async def delete_webhook(self, sub_id: str) -> bool:
        """Forget a subscription and its undelivered events; False when there was none."""
        ...

    async def enable_webhook(self, sub_id: str) -> Subscription | None:
        """Re-enable a subscription (after a 410); None when there is none."""
        ...


class LocalWrites:
    """Writes that go to this sidecar's engine and database only."""

    def __init__(self, engine: FlowEngine, outbox: WebhookOutbox) -> None:
        self.engine = engine
        self.outbox = outbox

    async def put_settings(self, key: QueueKey, values: Mapping[str, float], now: float) -> None:
        self.engine.put_settings(key, values, now)

    async def delete_settings(self, key: QueueKey, now: float) -> bool:
        return self.engine.delete_settings(key, now)

    async def set_defaults(self, policy: DefaultPolicy | None, now: float) -> None:
        self.engine.set_defaults(policy, now)

    async def create_webhook(self, *, url: str, secret: str, vhost: str,
                             queue: str, warnings: bool = False) -> Subscription:
        return self.outbox.create(url=url, secret=secret, vhost=vhost, queue=queue,
                                  warnings=warnings)

    async def delete_webhook(self, sub_id: str) -> bool:
        return self.outbox.delete(sub_id)

    async def enable_webhook(self, sub_id: str) -> Subscription | None:
        return self.outbox.set_enabled(sub_id, True)
