"""Request bodies and answer shapes of the credit-grant routes (`/grants`).

Beside `api.schemas`, whose conventions they follow: `POST /grants/...` asks for credit,
`POST /grants/release` gives it back (see `sidecar.signals.grants`). Requests are strict
like the settings: integers only, no unknown keys, limits that name the field in a 422.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt
from pydantic.alias_generators import to_camel

from api.schemas import Answer, DepthOut, integral

MAX_GRANT_MESSAGES = 1_000_000_000
MAX_GRANT_BYTES = 2**50
MAX_GRANT_WAIT = 30.0
GrantMessages = Annotated[StrictInt, Field(ge=1, le=MAX_GRANT_MESSAGES),
                          BeforeValidator(integral)]
GrantBytes = Annotated[StrictInt, Field(ge=1, le=MAX_GRANT_BYTES), BeforeValidator(integral)]
# a lease under 0.1 s would end before its answer reached the producer: never usable
MIN_LEASE = 0.1
Seconds = Annotated[float, Field(strict=True, ge=MIN_LEASE, le=300)]


class GrantRequest(BaseModel):
    """camelCase on the wire (snake_case accepted), unknown keys refused."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class GrantReleaseIn(GrantRequest):
    """End a grant: how much of it was used (omitted: all of it); the rest returns now.
    `confirmed`: the broker confirmed (acked or nacked) every message sent with it, so an
    upper bound of the queue's depth taken after this release counts them all."""

    grant_id: str = Field(min_length=1, max_length=100)
    used_messages: Annotated[StrictInt, Field(ge=0, le=MAX_GRANT_MESSAGES),
                             BeforeValidator(integral)] | None = None
    used_bytes: Annotated[StrictInt, Field(ge=0, le=MAX_GRANT_BYTES),
                          BeforeValidator(integral)] | None = None
    confirmed: StrictBool = False


class GrantIn(GrantRequest):
    """Ask for credit: up to `messages` messages and `bytes` body bytes (required when a
    destination has a size stop, as every queue under the default queue limit has), for
    `lease` seconds (default and cap: the sidecar's options); `wait` up to that many
    seconds for credit when none is free; `release` ends earlier grants in the same
    request."""

    model_config = ConfigDict(json_schema_extra={"example": {
        "messages": 100, "bytes": 102400, "wait": 5}})

    messages: GrantMessages
    bytes: GrantBytes | None = None
    lease: Seconds | None = None
    wait: Annotated[float, Field(strict=True, ge=0, le=MAX_GRANT_WAIT)] = 0.0
    release: list[GrantReleaseIn] = Field(default_factory=list, max_length=16)


class ReleaseIn(GrantRequest):
    """End one or more grants."""

    model_config = ConfigDict(json_schema_extra={"example": {
        "grants": [{"grantId": "Xy7...", "usedMessages": 40, "usedBytes": 4000}]}})

    grants: list[GrantReleaseIn] = Field(min_length=1, max_length=100)


class GrantOut(Answer):
    """What may be sent: at most `messages` messages and `bytes` bytes (null: no byte
    limit) before `expiresAt`; then release the grant with what was used. `grantId` is null
    when nothing was granted (`limitedBy` says why: ask again, with `wait`)."""

    grant_id: str | None
    messages: int
    bytes: int | None
    lease_seconds: float
    expires_at: str | None
    vhost: str
    destinations: list[str]
    limited_by: str | None
    not_held: list[str] = Field(description="released grants that were no longer held "
                                "(expired: taken as fully used)")


class ReleaseOut(Answer):
    """How many grants were ended, and which ids were not held any more."""

    released: int
    not_held: list[str]


class HeldOut(Answer):
    """Live grants on a queue and their credit."""

    grants: int
    messages: int
    bytes: int


class FreeOut(Answer):
    """Credit a new grant could have per dimension (null: the dimension is not watched)."""

    messages: int | None
    bytes: int | None


class QueueGrantsOut(Answer):
    """`GET /grants/{vhost}/{queue}`: the queue's part of the credit ledger."""

    vhost: str
    queue: str
    flow_stopped: bool
    depth: DepthOut | None
    held: HeldOut
    outstanding: DepthOut = Field(description="held plus spent credit the depth sample "
                                  "does not show yet")
    free: FreeOut
    producers: list[str]
