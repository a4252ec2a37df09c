"""The answers of the webhook routes: a subscription (never its secret) and its deliveries."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from api.schemas import Answer


class DeliveryCounts(Answer):
    """A subscription's outbox rows by status."""

    pending: int
    delivered: int
    failed: int


class SubscriptionOut(Answer):
    """A webhook subscription as the API shows it: everything but the secret."""

    id: str
    url: str = Field(description="in full only to requests with the sidecar's token; "
                                 "else query values and userinfo show as ***")
    vhost: str
    queue: str
    warnings: bool = Field(description="it also gets flow.warning and flow.warning-cleared")
    enabled: bool
    disabled_reason: str | None
    created_at: str | None
    deliveries: DeliveryCounts


class DeliveryOut(Answer):
    """One event for one subscription, and what its delivery attempts did."""

    webhook_id: str
    vhost: str
    queue: str
    sequence: int
    status: Literal["pending", "delivered", "failed", "forwarded"]
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: str | None
    last_attempt_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    event: dict[str, Any]
