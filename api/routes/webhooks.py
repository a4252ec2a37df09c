"""`/webhooks`: subscribe a URL to the flow transitions of some queues; see their deliveries.

The event payload itself is `sidecar.signals.event_json.webhook_event`. Secrets go in,
never out: no answer (not even a 422) carries one. A URL's query often holds the
receiver's key: answers show it redacted (`sidecar.redaction`) unless the request carries
the sidecar's token, and with a token set, delivery details need it too (their errors
tell what answers at an address). Targets are checked by `sidecar.signals.webhook_targets`.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictBool, field_validator

from api.deps import SettingsDep, TokenHolder, WebhooksDep, WriteAccess, WritesDep
from api.lookups import store_failed
from api.request_body import body_schema, json_body
from api.schemas import Problem
from api.webhook_schemas import DeliveryOut, SubscriptionOut
from sidecar.flow.engine import StoreUnavailable
from sidecar.name_patterns import MAX_GLOB
from sidecar.redaction import redact_url
from sidecar.signals.event_json import iso
from sidecar.signals.webhook_outbox import PENDING, OutboxRow, Subscription
from sidecar.signals.webhook_signing import secret_key
from sidecar.signals.webhook_targets import TargetPolicy

router = APIRouter(tags=["webhooks"])


class WebhookIn(BaseModel):
    """A new subscription: where to POST, the signing secret, which queues (globs)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {
        "url": "https://ops.example.com/flow-hook", "secret": "a long random passphrase",
        "queue": "orders.*", "vhost": "/"}})

    url: str = Field(max_length=2000, description=(
        "http(s) URL of the receiver. Refused: link-local, metadata, unspecified and "
        "reserved addresses, ports 4369 and 25672, and loopback or private addresses "
        "unless the sidecar runs with --webhook-allow-private"), json_schema_extra={
        "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://([^\s\x00-\x1f\x7f/?#@:\[\]]+|"
                   r"\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([/?#][^\s\x00-\x1f\x7f]*)?$"})
    secret: SecretStr = Field(min_length=1, max_length=500)
    queue: str = Field("*", min_length=1, max_length=MAX_GLOB, description=(
        "queue name or glob (`*`, `?`, `[...]`, case-sensitive, the whole name)"))
    vhost: str = Field("*", min_length=1, max_length=MAX_GLOB, description="vhost name or glob")
    warnings: StrictBool = Field(False, description=(
        "also `flow.warning` and `flow.warning-cleared` events (a queue's warning episode "
        "started or ended)"))

    @field_validator("url")
    @classmethod
    def _http_only(cls, url: str) -> str:
        if any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
            # no delivery could go there, and every failure would log the raw bytes
            raise ValueError("must not contain spaces or control characters")
        parts = urlsplit(url)  # .port raises ValueError on a port that is no port
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.port == 0:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            # URLs are listed to anyone and logged: credentials belong in the secret
            raise ValueError("must not carry credentials (user:password@); receivers "
                             "authenticate events by their signature")
        return url


def subscription_json(sub: Subscription, counts: dict[str, int], *, full_url: bool
                      ) -> dict[str, Any]:
    """A subscription as the API shows it: everything but the secret, the URL redacted
    unless `full_url`."""
    return {
        "id": sub.id, "url": sub.url if full_url else redact_url(sub.url),
        "vhost": sub.vhost, "queue": sub.queue, "warnings": sub.warnings,
        "enabled": sub.enabled, "disabledReason": sub.disabled_reason,
        "createdAt": iso(sub.created_at),
        "deliveries": {s: counts.get(s, 0) for s in ("pending", "delivered", "failed")},
    }


def delivery_json(row: OutboxRow) -> dict[str, Any]:
    """One outbox row: the event and what its delivery attempts did."""
    return {
        "webhookId": row.msg_id, "vhost": row.vhost, "queue": row.queue,
        "sequence": row.sequence, "status": row.status, "attempts": row.attempts,
        "lastStatus": row.last_status, "lastError": row.last_error,
        "createdAt": iso(row.created_at), "lastAttemptAt": iso(row.last_attempt_at),
        "nextAttemptAt": iso(row.next_attempt_at) if row.status == PENDING else None,
        "deliveredAt": iso(row.delivered_at), "event": json.loads(row.body),
    }


def _found(sub: Subscription | None, sub_id: str) -> Subscription:
    if sub is None:
        raise HTTPException(404, f"no webhook subscription {sub_id!r}")
    return sub


_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such subscription"}}
_WRITE: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "the sidecar's token is required"},
    503: {"model": Problem, "description": "the shared state could not be written; nothing "
                                           "changed"}}


@router.post("/webhooks", status_code=201, dependencies=[WriteAccess],
             openapi_extra=body_schema(WebhookIn), response_model=SubscriptionOut,
             responses={**_WRITE, 422: {"model": Problem, "description": "refused, nothing "
                                                                         "stored"}})
async def create_webhook(request: Request, response: Response, settings: SettingsDep,
                         token_holder: TokenHolder, writes: WritesDep) -> dict[str, Any]:
    """Subscribe a URL; it gets every later transition of the matching queues."""
    try:
        body = await json_body(request, WebhookIn)
    except RequestValidationError as exc:  # drop echoed inputs: they may hold the secret
        raise RequestValidationError(
            [{k: v for k, v in e.items() if k != "input"} for e in exc.errors()]) from None
    secret = body.secret.get_secret_value()
    try:
        secret_key(secret)
    except ValueError as exc:
        raise HTTPException(422, detail=[{"loc": ["body", "secret"], "msg": str(exc),
                                          "type": "value_error"}]) from None
    problem = TargetPolicy(settings.webhook_allow_private).url_problem(body.url)
    if problem:
        raise HTTPException(422, detail=[{"loc": ["body", "url"], "msg": problem,
                                          "type": "value_error"}])
    try:
        sub = await writes.create_webhook(url=body.url, secret=secret, vhost=body.vhost,
                                          queue=body.queue, warnings=body.warnings)
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    response.headers["location"] = f"/webhooks/{sub.id}"
    return subscription_json(sub, {}, full_url=token_holder)


@router.get("/webhooks", response_model=list[SubscriptionOut])
async def list_webhooks(webhooks: WebhooksDep, token_holder: TokenHolder
                        ) -> list[dict[str, Any]]:
    """Every subscription, oldest first, with its delivery counts (URLs in full only to
    the token's holders)."""
    counts = webhooks.status_counts()
    return [subscription_json(s, counts.get(s.id, {}), full_url=token_holder)
            for s in webhooks.subscriptions()]


@router.get("/webhooks/{sub_id}", response_model=SubscriptionOut, responses=_NOT_FOUND)
async def get_webhook(sub_id: str, webhooks: WebhooksDep, token_holder: TokenHolder
                      ) -> dict[str, Any]:
    """One subscription, with its delivery counts (its URL in full only to the token's
    holders)."""
    sub = _found(webhooks.get(sub_id), sub_id)
    return subscription_json(sub, webhooks.status_counts().get(sub.id, {}),
                             full_url=token_holder)


@router.get("/webhooks/{sub_id}/deliveries", response_model=list[DeliveryOut],
            dependencies=[WriteAccess], responses={**_NOT_FOUND, **_WRITE})
async def list_deliveries(sub_id: str, webhooks: WebhooksDep,
                          limit: Annotated[int, Query(ge=1, le=1000)] = 100
                          ) -> list[dict[str, Any]]:
    """The subscription's most recent events, newest first, with their attempts (needs
    the token when one is set)."""
    _found(webhooks.get(sub_id), sub_id)
    return [delivery_json(row) for row in webhooks.deliveries(sub_id, limit)]


@router.post("/webhooks/{sub_id}/enable", dependencies=[WriteAccess],
             response_model=SubscriptionOut, responses={**_NOT_FOUND, **_WRITE})
async def enable_webhook(sub_id: str, webhooks: WebhooksDep, writes: WritesDep,
                         token_holder: TokenHolder) -> dict[str, Any]:
    """Re-enable (after a 410): waiting events are delivered from where they stopped."""
    try:
        sub = _found(await writes.enable_webhook(sub_id), sub_id)
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    return subscription_json(sub, webhooks.status_counts().get(sub.id, {}),
                             full_url=token_holder)


@router.delete("/webhooks/{sub_id}", status_code=204, dependencies=[WriteAccess],
               response_class=Response, responses={**_NOT_FOUND, **_WRITE})
async def delete_webhook(sub_id: str, writes: WritesDep) -> Response:
    """Unsubscribe; undelivered events of this subscription are dropped."""
    try:
        if not await writes.delete_webhook(sub_id):
            raise HTTPException(404, f"no webhook subscription {sub_id!r}")
    except StoreUnavailable as exc:
        raise store_failed(exc) from None
    return Response(status_code=204)
