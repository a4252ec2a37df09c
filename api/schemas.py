"""Request bodies. Strict: integers only, no unknown keys, so a typo is a 422 that names it
instead of a setting silently not applied."""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictInt

from sidecar.thresholds import FLOW_KEYS, MAX_VALUE, DefaultPolicy

FlowValue = Annotated[StrictInt | None, Field(default=None, ge=0, le=MAX_VALUE)]


def _alias(key: str) -> AliasChoices:
    """Accept `qpid.flow_stop_count` (Qpid's key) and `flow_stop_count` (snake-case)."""
    return AliasChoices(key, key.removeprefix("qpid."))


class FlowSettingsIn(BaseModel):
    """The four qpid.flow_* settings of one queue; omitted keys are unset."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"qpid.flow_stop_count": 900,
                                       "qpid.flow_resume_count": 500}},
    )

    flow_stop_count: FlowValue = Field(validation_alias=_alias("qpid.flow_stop_count"))
    flow_resume_count: FlowValue = Field(validation_alias=_alias("qpid.flow_resume_count"))
    flow_stop_size: FlowValue = Field(validation_alias=_alias("qpid.flow_stop_size"))
    flow_resume_size: FlowValue = Field(validation_alias=_alias("qpid.flow_resume_size"))

    def values(self) -> dict[str, int]:
        """The set keys, by their Qpid names."""
        return {
            key: value
            for key in FLOW_KEYS
            if (value := getattr(self, key.removeprefix("qpid."))) is not None
        }


Percent = Annotated[StrictInt, Field(ge=0, le=100)]


class DefaultsIn(BaseModel):
    """qpidd's broker-wide defaults, changeable at run time."""

    model_config = ConfigDict(extra="forbid")

    defaultFlowStopThreshold: Percent = Field(  # noqa: N815 (JSON field names)
        validation_alias=AliasChoices("defaultFlowStopThreshold", "default_flow_stop_threshold"))
    defaultFlowResumeThreshold: Percent = Field(  # noqa: N815
        validation_alias=AliasChoices("defaultFlowResumeThreshold",
                                      "default_flow_resume_threshold"))
    defaultQueueLimit: Annotated[StrictInt, Field(ge=0, le=MAX_VALUE)] = Field(  # noqa: N815
        validation_alias=AliasChoices("defaultQueueLimit", "default_queue_limit"))

    def policy(self) -> DefaultPolicy:
        return DefaultPolicy(self.defaultFlowStopThreshold, self.defaultFlowResumeThreshold,
                             self.defaultQueueLimit)


def defaults_json(policy: DefaultPolicy, *, from_startup: bool) -> dict[str, object]:
    """The defaults in effect, and whether they are the start-up flags or a runtime change."""
    return {
        "defaultFlowStopThreshold": policy.stop_percent,
        "defaultFlowResumeThreshold": policy.resume_percent,
        "defaultQueueLimit": policy.queue_limit,
        "source": "startup" if from_startup else "api",
    }
