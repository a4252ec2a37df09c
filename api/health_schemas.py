"""The shapes of `/healthz` and `/readyz`: the poller, live depth, the statistics' lag,
the depth source and the last wake-ups of parked long polls and SSE streams."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.schemas import Answer, DefaultsOut


class PollerStatus(Answer):
    """The poller's health."""

    queues: int
    last_poll_at: str | None
    last_poll_age_seconds: float | None
    last_poll_error: str | None
    consecutive_failures: int
    cycles: int
    last_cycle_seconds: float | None
    refused_figures: int = Field(description="queue reads refused, ever, for a depth figure "
                                 "no broker can report (negative, not an integer, over "
                                 "2^63 - 1); such a queue keeps its state and goes stale")
    last_refused_figure: str | None = Field(description="the last of them: queue and field")


class LiveStatus(Answer):
    """Live depth: whether the hot queues are read over AMQP between polls."""

    enabled: bool = Field(description="false with --no-live-depth")
    connected: bool = Field(description="false: statistics only (see lastError)")
    last_error: str | None
    hot_queues: int
    watched_queues: int = Field(description="queues read live: the hot set, then the others "
                                            "in turn with the budget left over")
    full_pass_seconds: float | None = Field(description=(
        "how long the last turn through every watched queue outside the hot set took: "
        "each is read live at least this often"))
    hot_read_gap_seconds: float | None = Field(description=(
        "the longest wait between two reads of one hot queue over the last whole 10 s "
        "(None before one ended): above the reaction time you need, raise --live-budget"))
    budget: float | None = Field(description="--live-budget: passive declares per second, "
                                 "at most")
    idle_budget: float | None = Field(description=(
        "--live-idle-budget: of them, for the watched queues outside the hot set"))
    samples: int
    errors: int
    last_sample_at: str | None


class LagStatus(Answer):
    """How far the broker's statistics lag behind, in seconds: `configured`
    (--broker-stats-lag), `measured` from live samples (None before the first
    measurement) and `effective`, the larger, which every figure is dated by."""

    configured: float
    measured: float | None
    effective: float


class DepthSourceStatus(Answer):
    """RabbitMQ: where queue depths and alarms come from (--depth-source)."""

    mode: Literal["auto", "management", "prometheus"]
    active: Literal["management", "prometheus", "queue-totals"] = Field(description=(
        "where the last poll's depths came from (queue-totals: the management API's "
        "message counts, no bytes)"))
    reason: str = Field(description="why that source, for an operator")
    alarms_from: Literal["management", "prometheus"]
    prometheus_urls: list[str]
    prometheus_error: str | None = Field(description="why the last Prometheus read failed")
    bytes_every_seconds: float | None = Field(description=(
        "prometheus: how often the byte figures are read (counts: every poll)"))
    listing_every_seconds: float | None = Field(description=(
        "prometheus: how often the queue listing (arguments, policies) is read"))
    listing_paged: bool = Field(description=(
        "the management API could not list every queue in one answer: pages of 500"))


class LastWakeUp(Answer):
    """The last wake-up written straight to waiting connections."""

    connections: int = Field(description="connections it wrote to")
    seconds: float = Field(description=(
        "from the change (or the first wait's end) to the last write handed to a "
        "connection"))
    cpu_seconds: float = Field(description=(
        "the process's CPU time over the writes (less than seconds: it waited for a core)"))


class WakeUpStatus(Answer):
    """Long polls parked now, the last wake-ups of long polls and SSE streams, and the
    last long polls answered together when their waits ended."""

    writes: Literal["direct", "send"] = Field(description=(
        "how wake-ups are written: direct (--direct-writes on, on the server it knows) or "
        "through ASGI send (off, another server, or after a failure of the direct path)"))
    direct_failure: str | None = Field(description="why the direct path turned itself off")
    long_polls_waiting: int
    long_polls: LastWakeUp | None
    long_polls_ended: LastWakeUp | None
    streams: LastWakeUp | None


class HealthAnswer(Answer):
    """`/healthz`: the process serves; with the defaults in effect and their source."""

    status: Literal["ok", "degraded"] = Field(description=(
        "degraded: the broker answers without queue depths or alarms (see problems)"))
    problems: list[str] = Field(description="why degraded, for an operator")
    depth_source: DepthSourceStatus | None = Field(description="null for Qpid brokers")
    poller: PollerStatus
    defaults: DefaultsOut
    live: LiveStatus
    statistics_lag: LagStatus
    wakeups: WakeUpStatus


class ReadyAnswer(Answer):
    """`/readyz`: ready while the broker was read within --stale-after."""

    ready: bool
    poller: PollerStatus
