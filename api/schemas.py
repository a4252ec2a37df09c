"""Request bodies and the shapes of the answers.

Requests are strict: integers only (900.0 is one, as in JSON Schema), no unknown keys, so
a typo is a 422 that names it instead of a setting silently not applied. Answers
document, field for field, the JSON the routes send, so `/openapi.json` describes every
answer. The broker-wide, credit-grant, webhook and health routes keep theirs beside this
module (`api.vhost_schemas`, `grant_schemas`, `webhook_schemas`, `health_schemas`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
)
from pydantic.alias_generators import to_camel

from api.edge.protocol import PRODUCER_CLASS
from sidecar.flow.fill_rate import MAX_HORIZON, WARNING_FRACTION, WARNING_HORIZON, WARNING_KEYS
from sidecar.flow.producer_classes import MAX_CLASSES, NAME
from sidecar.flow.thresholds import FLOW_KEYS, DefaultPolicy


def integral(value: Any) -> Any:
    """JSON Schema's `integer` includes 900.0, so the API reads it as 900; 9.5, strings
    and booleans stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# The largest integer every JSON client carries exactly (JavaScript's doubles; a float near
# 2**63 rounds past any bound a validator checks). 9 PB as bytes: room enough.
JSON_MAX = 2**53 - 1
# The bounds go inside, next to the integer: outside a validator pydantic would document
# them as "ge"/"le", which JSON Schema does not know.
FlowInt = Annotated[StrictInt, Field(ge=0, le=JSON_MAX), BeforeValidator(integral)]
FlowValue = Annotated[FlowInt | None, Field(default=None)]
# warning settings: numbers (integers too) in the ranges `fill_rate.warning_problems` judges
WarningHorizon = Annotated[
    Annotated[StrictFloat, Field(ge=0, le=MAX_HORIZON, allow_inf_nan=False)] | None,
    Field(default=None)]
WarningFraction = Annotated[
    Annotated[StrictFloat, Field(gt=0, le=1, allow_inf_nan=False)] | None, Field(default=None)]
CLASS_FRACTION: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}


def _alias(key: str) -> AliasChoices:
    """Accept `qpid.flow_stop_count` (Qpid's key) and `flow_stop_count` (snake-case)."""
    return AliasChoices(key, key.removeprefix("qpid."))


class FlowSettingsIn(BaseModel):
    """The four qpid.flow_* settings of one queue and its two warning settings
    (docs/graded-flow.md); omitted keys are unset."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"qpid.flow_stop_count": 900,
                                       "qpid.flow_resume_count": 500}},
    )

    flow_stop_count: FlowValue = Field(validation_alias=_alias("qpid.flow_stop_count"))
    flow_resume_count: FlowValue = Field(validation_alias=_alias("qpid.flow_resume_count"))
    flow_stop_size: FlowValue = Field(validation_alias=_alias("qpid.flow_stop_size"))
    flow_resume_size: FlowValue = Field(validation_alias=_alias("qpid.flow_resume_size"))
    warning_horizon: WarningHorizon = Field(validation_alias=AliasChoices(
        WARNING_HORIZON, "warning_horizon"))
    warning_fraction: WarningFraction = Field(validation_alias=AliasChoices(
        WARNING_FRACTION, "warning_fraction"))
    # judged by `producer_classes.parse_classes` (a 422 naming `producerClasses.NAME`)
    producer_classes: dict[str, Any] | None = Field(
        None, validation_alias="producerClasses", description=(
            "producer classes, each a fraction in (0, 1] of the queue's thresholds "
            "(docs/graded-flow.md); omitted: the vhost's default classes, {}: none"),
        json_schema_extra={"additionalProperties": CLASS_FRACTION, "maxProperties": MAX_CLASSES,
                           "propertyNames": {"pattern": PRODUCER_CLASS}})

    def classes(self) -> dict[str, Any] | None:
        """`producerClasses` as given (None: not given)."""
        return self.producer_classes

    def values(self) -> dict[str, float]:
        """The set keys, by their Qpid names (`flow.warning_*` for the warning ones)."""
        return {
            key: value
            for key in (*FLOW_KEYS, *WARNING_KEYS)
            if (value := getattr(self, key.removeprefix("qpid.").removeprefix("flow."))) is
            not None
        }


Percent = Annotated[StrictInt, Field(ge=0, le=100), BeforeValidator(integral)]


class DefaultsIn(BaseModel):
    """qpidd's broker-wide defaults, changeable at run time."""

    model_config = ConfigDict(extra="forbid")

    defaultFlowStopThreshold: Percent = Field(  # noqa: N815 (JSON field names)
        validation_alias=AliasChoices("defaultFlowStopThreshold", "default_flow_stop_threshold"))
    defaultFlowResumeThreshold: Percent = Field(  # noqa: N815
        validation_alias=AliasChoices("defaultFlowResumeThreshold",
                                      "default_flow_resume_threshold"))
    defaultQueueLimit: FlowInt = Field(  # noqa: N815
        validation_alias=AliasChoices("defaultQueueLimit", "default_queue_limit"))

    def policy(self) -> DefaultPolicy:
        return DefaultPolicy(self.defaultFlowStopThreshold, self.defaultFlowResumeThreshold,
                             self.defaultQueueLimit)


def _default_values(policy: DefaultPolicy) -> dict[str, object]:
    return {
        "defaultFlowStopThreshold": policy.stop_percent,
        "defaultFlowResumeThreshold": policy.resume_percent,
        "defaultQueueLimit": policy.queue_limit,
    }


def defaults_json(policy: DefaultPolicy, startup: DefaultPolicy, *,
                  from_api: bool) -> dict[str, object]:
    """The defaults in effect, whether they were set through the API (stored: they win over
    the start-up options, also after a restart) and the start-up options themselves."""
    return {**_default_values(policy), "source": "api" if from_api else "startup",
            "startup": _default_values(startup)}


# -- answers ------------------------------------------------------------------------------
# Documented shapes of what the routes send: the JSON producers and operators read today,
# field for field. They validate nothing a producer reads on the hot path (the `/flow`
# fast path writes cached bytes); they are the OpenAPI contract and the fuzzer's oracle.

SourceName = Literal["api", "arguments", "vhost", "default", "disabled", "none"]
StoppedByName = Literal["queue", "stale", "vhost-quota", "broker-alarm"]
# `class:<name>`: the producer's class (X-Producer-Class) is stopped
ClassStop = Annotated[str, Field(pattern=f"^class:{NAME}$")]
FlowSource = Literal["sidecar", "broker"]


class Answer(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class DepthOut(Answer):
    """Depth as Qpid counts it: ready plus unacknowledged messages, and their bytes (null
    when the broker reports no byte count for the queue: streams)."""

    messages: int
    bytes: int | None


DepthSourceName = Literal["statistics", "live"]
DEPTH_SOURCE = ("where `depth` came from: the broker's statistics, or a live sample (ready "
                "count read from the queue plus the statistics' unacknowledged messages)")
BYTES_ESTIMATED = ("true when `depth.bytes` is no figure of the broker's for this count: the "
                   "live message count times the statistics' mean message size, or, before "
                   "any mean size is known, the broker's last bytes of another count")


class ThresholdsOut(BaseModel):
    """The four qpid.flow_* values (null: not set; 0 in effect: dimension disabled)."""

    model_config = ConfigDict(populate_by_name=True)

    flow_stop_count: int | None = Field(alias="qpid.flow_stop_count")
    flow_resume_count: int | None = Field(alias="qpid.flow_resume_count")
    flow_stop_size: int | None = Field(alias="qpid.flow_stop_size")
    flow_resume_size: int | None = Field(alias="qpid.flow_resume_size")
    warning_horizon: float | None = Field(None, alias="flow.warning_horizon", description=(
        "stored settings only, when set: the warning horizon in seconds"))
    warning_fraction: float | None = Field(None, alias="flow.warning_fraction", description=(
        "stored settings only, when set: the warning fraction of a stop"))


class SettingsOut(ThresholdsOut):
    """Stored settings: the four qpid.flow_* values and the producer classes (null: none
    stored, so a queue's vhost default applies)."""

    producer_classes: dict[str, float] | None = Field(None, alias="producerClasses")


class ClassOut(Answer):
    """One producer class of a queue: its fraction, its own thresholds, its state."""

    fraction: float
    flow_stopped: bool = Field(description="its producers are told to stop")
    thresholds: ThresholdsOut


class SourcesOut(Answer):
    """Where each dimension's thresholds come from."""

    count: SourceName
    size: SourceName


class LimitsOut(Answer):
    """The maxima and overflow behaviour the broker enforces on the queue."""

    max_length: int | None
    max_length_bytes: int | None
    overflow: str
    ring: bool


class StopReasonOut(Answer):
    """One reason producers are told to stop, and a sentence that explains it."""

    by: StoppedByName | ClassStop
    detail: str


STOPPED_BY = ("why producers must stop: the queue's own thresholds (`queue`, the only one "
              "flowStoppedCount counts), stale data under --on-stale stop (`stale`), its "
              "vhost's store quota (`vhost-quota`), a broker memory or disk alarm "
              "(`broker-alarm`), and for a producer that says its class (X-Producer-Class) "
              "its class (`class:<name>`, last); empty while they may send")


class ProducersOut(Answer):
    """Active producers of the queue, their summed capacity and the publish rate."""

    active: int
    capacity: int
    capacity_bytes: int | None = Field(description="summed X-Producer-Capacity-Bytes; null "
                                       "when no active producer declared one")
    publish_rate: float | None


class ProducerOut(Answer):
    """One active producer: its capacity, when it last asked, what it was told."""

    id: str
    capacity: int
    capacity_bytes: int | None
    last_seen_at: str | None
    told_stopped: bool


class TopProducerOut(Answer):
    """One producer that filled the queue in the minute before its last stop
    (docs/graded-flow.md#who-filled-it)."""

    producer: str = Field(description="its X-Producer-Id")
    producer_class: str | None = Field(alias="class", description=(
        "the class its newest report or grant named; null when none did"))
    messages: int = Field(description="what it published or was granted in the minute "
                          "(the larger of the two, never their sum)")
    share: float = Field(description="its part of all the named producers' messages, 0 to 1")


FILL_RATE = ("net messages/s the queue filled at over the last 20 s (negative: draining), "
             "to 0.1; null until its figures span 2 s (docs/graded-flow.md)")
FILL_RATE_BYTES = "the same in bytes/s, from the statistics' byte counts; null without them"
SECONDS_TO_STOP = ("while the queue fills: seconds until its depth reaches the nearest stop "
                   "threshold at that rate, to 0.1 (0 at or over it); null otherwise")
WARNING = ("true while secondsToStop is at most the warning horizon or the depth is at "
           "least the warning fraction of a stop; advice only, it never stops anyone, and "
           "a change of it does not end a long poll")


class FlowAnswer(Answer):
    """`GET /flow/...`: what a producer must do now, and why."""

    vhost: str
    queue: str
    exists: bool
    flow_stopped: bool = Field(description="pause sending while true")
    flow_stopped_count: int = Field(description="times the queue itself became flow "
                                    "stopped (not its vhost quota or a broker alarm)")
    measured_flow_stopped: bool = Field(description="the queue's own state, before "
                                        "--on-stale")
    flow_stopped_by: list[StoppedByName | ClassStop] = Field(description=STOPPED_BY)
    flow_stop_reasons: list[StopReasonOut]
    flow_source: FlowSource = Field(description=(
        "who decides flowStopped and flowStoppedCount: `sidecar` (its state machine over "
        "the polled depth, RabbitMQ) or `broker` (the broker's own, Qpid C++ and Broker-J)"))
    broker_flow_stopped_count: int | None = Field(None, description=(
        "the broker's own flowStoppedCount as last read (qpidd; it restarts with the "
        "broker), beside flowStoppedCount, which never goes down; null where the broker "
        "keeps none"))
    depth: DepthOut | None
    depth_source: DepthSourceName = Field(description=DEPTH_SOURCE)
    bytes_estimated: bool = Field(description=BYTES_ESTIMATED)
    thresholds: ThresholdsOut
    sources: SourcesOut
    limits: LimitsOut
    config_errors: list[str]
    config_warnings: list[str]
    sampled_at: str | None
    stale: bool
    on_stale: Literal["hold", "stop", "go"]
    last_transition_at: str | None
    producers: ProducersOut
    overflow_risk: bool
    overflow_risk_detail: str | None
    overflow_risk_unjudged: str | None = Field(description="why a dimension cannot be "
                                               "judged (producers' byte windows unknown)")
    fill_rate: float | None = Field(description=FILL_RATE)
    fill_rate_bytes: float | None = Field(description=FILL_RATE_BYTES)
    seconds_to_stop: float | None = Field(description=SECONDS_TO_STOP)
    warning: bool = Field(description=WARNING)
    suggested_rate: float | None = Field(None, description=(
        "only in the answer to a producer that sent X-Producer-Id, while the queue is paced "
        "(warned or stopped) and a rate is known: messages/s it may send, its share of what "
        "the consumers take; 0 while the queue is told to stop. Advice: it never releases "
        "anyone (docs/graded-flow.md#pacing)"))
    version: int = Field(description="pass as `since` to long-poll for the next change")


class QueueView(Answer):
    """`/queues` item: the flow answer plus the stored settings. A queue the broker does
    not report (settings waiting for it) has `exists: false` and only the fields it can
    have; `activeProducers` and `topProducers` are in the single-queue answer only."""

    vhost: str
    queue: str
    exists: bool
    flow_stopped: bool | None = None
    flow_stopped_count: int | None = None
    measured_flow_stopped: bool | None = None
    flow_stopped_by: list[StoppedByName] | None = None
    flow_stop_reasons: list[StopReasonOut] | None = None
    flow_source: FlowSource | None = None
    depth: DepthOut | None = None
    depth_source: DepthSourceName | None = Field(None, description=DEPTH_SOURCE)
    bytes_estimated: bool | None = Field(None, description=BYTES_ESTIMATED)
    thresholds: ThresholdsOut | None = None
    sources: SourcesOut | None = None
    limits: LimitsOut | None = None
    config_errors: list[str] | None = None
    config_warnings: list[str] | None = None
    sampled_at: str | None = None
    stale: bool | None = None
    on_stale: Literal["hold", "stop", "go"] | None = None
    last_transition_at: str | None = None
    producers: ProducersOut | None = None
    overflow_risk: bool | None = None
    overflow_risk_detail: str | None = None
    overflow_risk_unjudged: str | None = None
    fill_rate: float | None = Field(None, description=FILL_RATE)
    fill_rate_bytes: float | None = Field(None, description=FILL_RATE_BYTES)
    seconds_to_stop: float | None = Field(None, description=SECONDS_TO_STOP)
    warning: bool | None = Field(None, description=WARNING)
    version: int | None = None
    settings: SettingsOut | None = None
    classes: dict[str, ClassOut] | None = Field(None, description=(
        "each producer class's state (docs/graded-flow.md#producer-classes); absent: none"))
    active_producers: list[ProducerOut] | None = None
    top_producers: list[TopProducerOut] | None = Field(None, description=(
        "who filled the queue in the minute before its last stop since the sidecar "
        "started, most first (at most 5); null before its first stop, empty when no "
        "producer reported or took grants"))


class QueuePage(BaseModel):
    """`GET /queues?page=N`: RabbitMQ's paged object around one page of queue views, its
    field names snake_case as RabbitMQ writes them."""

    items: list[QueueView]
    page: int = Field(description="this page, from 1")
    page_size: int = Field(description="queues per page asked for")
    page_count: int = Field(description="pages the filtered queues fill (0 for none)")
    item_count: int = Field(description="queues on this page")
    filtered_count: int = Field(description="queues that pass the filters")
    total_count: int = Field(description="queues before filtering")


class QueueRef(Answer):
    """A queue by name."""

    vhost: str
    queue: str


class ProducerLeft(Answer):
    """`DELETE /producers/{id}`: the producer and the queues it was forgotten on."""

    producer: str
    queues: list[QueueRef]


class DestinationOut(Answer):
    """One queue a message routed through the exchange reaches."""

    queue: str
    known: bool
    flow_stopped: bool
    version: int


class ExchangeFlowAnswer(Answer):
    """`GET /flow/exchange/...`: stopped while any destination queue is stopped."""

    vhost: str
    exchange: str
    routing_key: str
    flow_stopped: bool
    stopped_by: list[str] = Field(description="the destination queues that are stopped")
    flow_stopped_by: list[StoppedByName | ClassStop] = Field(description=STOPPED_BY)
    flow_stop_reasons: list[StopReasonOut]
    destinations: list[DestinationOut]
    stale: bool
    version: int


class DefaultValues(Answer):
    """qpidd's broker-wide default percentages and queue limit."""

    default_flow_stop_threshold: int
    default_flow_resume_threshold: int
    default_queue_limit: int


class DefaultsOut(DefaultValues):
    """The broker-wide defaults in effect and where they come from: `api` (stored through
    `PUT /defaults`; they win over the start-up options until `DELETE /defaults`) or
    `startup` (the flags / FLOW_* variables, shown in `startup` either way)."""

    source: Literal["startup", "api"]
    startup: DefaultValues


class QueueSamples(Answer):
    """Recent depth samples of one queue: [time, messages, bytes], oldest first."""

    vhost: str
    queue: str
    samples: list[tuple[float, int, int]]


class HistoryAnswer(Answer):
    """`/queues/history`: the dashboard's sparklines."""

    size: int
    queues: list[QueueSamples]


class Problem(BaseModel):
    """An error: `detail` says what was wrong (a list of field errors for a 422)."""

    detail: str | list[dict[str, Any]]
