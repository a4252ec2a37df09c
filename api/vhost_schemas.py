"""Request bodies and answer shapes of the broker-wide routes (`/vhosts`, `/alarms`).

Beside `api.schemas`, whose conventions they follow (strict bodies, camelCase answers).
Quota sizes are not range-checked here: `sidecar.flow.vhost_quota` refuses negative or
inverted values itself, in Qpid's words (`underfullSize=600 must be less or equal to
overfullSize=500`), and the 422 names the key. Broker-J's attribute names are accepted
as aliases: `storeOverfullSize`/`storeUnderfullSize` for the quota, `capacity`/
`flowResumeCapacity` for a vhost's default queue thresholds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt

from api.schemas import (
    Answer,
    DepthOut,
    FlowSettingsIn,
    FlowValue,
    SettingsOut,
    StoppedByName,
    StopReasonOut,
    integral,
)
from sidecar.flow.vhost_quota import QUOTA_KEYS

# whole-number floats (5000.0) read as integers, as on every other route
QuotaInt = Annotated[StrictInt, BeforeValidator(integral)]


class VhostQuotaIn(BaseModel):
    """A vhost's store quota: bytes (and optionally messages) summed over its queues."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "example": {"overfullSize": 50000000, "underfullSize": 45000000}})

    overfull_size: QuotaInt | None = Field(
        None, json_schema_extra={"minimum": 0},
        validation_alias=AliasChoices("overfullSize", "overfull_size", "storeOverfullSize"),
        description="stop every producer of the vhost above this many bytes (Broker-J "
                    "storeOverfullSize; 0: no byte limit)")
    underfull_size: QuotaInt | None = Field(
        None, json_schema_extra={"minimum": 0},
        validation_alias=AliasChoices("underfullSize", "underfull_size", "storeUnderfullSize"),
        description="let them go again below this many bytes (Broker-J storeUnderfullSize; "
                    "unset or 0: the overfull size)")
    overfull_messages: QuotaInt | None = Field(
        None, json_schema_extra={"minimum": 0},
        validation_alias=AliasChoices("overfullMessages", "overfull_messages"),
        description="the same in messages (0: no message limit)")
    underfull_messages: QuotaInt | None = Field(
        None, json_schema_extra={"minimum": 0},
        validation_alias=AliasChoices("underfullMessages", "underfull_messages"),
        description="the message level to resume below (unset or 0: the overfull one)")

    def values(self) -> dict[str, int]:
        """The set keys, by the API's names."""
        given = (self.overfull_size, self.underfull_size, self.overfull_messages,
                 self.underfull_messages)
        return {key: value for key, value in zip(QUOTA_KEYS, given) if value is not None}


class VhostDefaultsIn(FlowSettingsIn):
    """Default qpid.flow_* thresholds for the vhost's queues (below a queue's own settings
    and arguments, above the broker-wide percentages)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "example": {"capacity": 10485760, "flowResumeCapacity": 8388608}})

    flow_stop_size: FlowValue = Field(validation_alias=AliasChoices(
        "qpid.flow_stop_size", "flow_stop_size", "capacity"))
    flow_resume_size: FlowValue = Field(validation_alias=AliasChoices(
        "qpid.flow_resume_size", "flow_resume_size", "flowResumeCapacity"))


class QuotaOut(Answer):
    """A stored quota (null: not set)."""

    overfull_size: int | None = None
    underfull_size: int | None = None
    overfull_messages: int | None = None
    underfull_messages: int | None = None


class VhostView(Answer):
    """A vhost's broker-wide flow control: its total, quota and quota state, its default
    queue thresholds, and what stops every queue of it now."""

    vhost: str
    queues: int = Field(description="queues the broker reports in it")
    depth: DepthOut | None = Field(description="its queues' total at the last poll")
    quota: QuotaOut | None = Field(description="the quota stored through this API")
    broker_quota: QuotaOut | None = Field(None, description=(
        "the quota the broker enforces itself (Broker-J's storeOverfullSize and "
        "storeUnderfullSize); applied when none is stored here"))
    quota_source: Literal["api", "broker"] | None = Field(None, description=(
        "which quota applies"))
    store_overfull: bool = Field(description="the quota is in force (MST-1008)")
    store_overfull_count: int = Field(description="times it became overfull; survives "
                                                  "restarts")
    last_transition_at: str | None
    queue_defaults: SettingsOut | None
    flow_stopped_by: list[StoppedByName]
    flow_stop_reasons: list[StopReasonOut]


class AlarmOut(Answer):
    """One RabbitMQ resource alarm in force."""

    node: str
    resource: Literal["memory", "disk"]
    since: str | None = Field(description="when the sidecar first read it")


class AlarmsAnswer(Answer):
    """`/alarms`: the broker's memory and disk alarms, as last read from `/api/nodes`."""

    alarms: list[AlarmOut]
    read_at: str | None = Field(description="the last successful read")
    last_error: str | None = Field(description="why the last read failed (the alarms "
                                               "above are then the last known ones)")
