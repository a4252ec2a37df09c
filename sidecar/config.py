"""The sidecar's configuration: one Settings class, from flags and FLOW_* environment variables.

Every option of SPEC §9 is a field; pydantic-settings gives each a `--kebab-case` flag and a
`FLOW_UPPER_CASE` environment variable (flags win). Start-up refuses combinations an
operator would regret: qpidd's invalid default percentages, and a non-loopback listener
without a token unless `--insecure` says so.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import quote, urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sidecar.broker import SCHEMES, BrokerKind, kind_of_url
from sidecar.flow.fill_rate import WARNING_FRACTION, WARNING_HORIZON, warning_problems
from sidecar.flow.thresholds import DefaultPolicy


class Settings(BaseSettings):
    """flow-sidecar options (see `flow-sidecar --help`)."""

    model_config = SettingsConfigDict(
        env_prefix="FLOW_",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_prog_name="flow-sidecar",
        extra="ignore",
    )

    listen: str = Field("127.0.0.1:8080", description="host:port the API listens on")
    management_url: Annotated[list[str], NoDecode] = Field(
        ["http://127.0.0.1:15672"], min_length=1, description=(
            "broker management API; repeat the flag (or separate with commas) to list "
            "several nodes of one cluster, used in turn when one does not answer"))
    broker: Literal["auto"] | BrokerKind = Field("auto", description=(
        "the broker's kind; auto: from --management-url's scheme (http: rabbitmq, "
        "amqp: qpid-cpp, broker-j+http: broker-j)"))
    management_user: str = Field("guest", description="management API user")
    depth_source: Literal["auto", "management", "prometheus"] = Field("auto", description=(
        "RabbitMQ: where queue depths and alarms come from; management: the management "
        "API's statistics (its queue totals, counts only, where it has none); prometheus: "
        "rabbitmq_prometheus on every node (--prometheus-url): counts every poll, bytes and "
        "the queue list from the management API as often as their cost allows; auto: "
        "prometheus where its endpoints answer for every node of the broker, else "
        "management"))
    prometheus_url: Annotated[list[str], NoDecode] = Field([], description=(
        "rabbitmq_prometheus endpoint of each node of the cluster (repeat or comma-separate; "
        "default: each --management-url's host, port 15692, or 15691 with https)"))
    management_password: SecretStr = Field(SecretStr("guest"), description="its password")
    data_dir: Path = Field(Path("./data"), description="SQLite database and history files")
    poll_interval: float = Field(1.0, gt=0, description="seconds between broker polls")
    request_timeout: float = Field(5.0, gt=0, description="seconds before a broker read fails")
    stale_after: float = Field(10.0, gt=0, description="seconds without a sample before stale")
    on_stale: Literal["hold", "stop", "go"] = Field(
        "hold", description="what producers are told about stale queues"
    )
    metrics_per_queue: Literal["auto", "on", "off"] = Field("auto", description=(
        "per-queue series in /metrics: on, off, or auto (on up to 5,000 queues); the "
        "aggregated families are always there"))
    direct_writes: Literal["on", "off"] = Field("on", description=(
        "write long polls' and SSE streams' wake-ups straight to their connections (on) "
        "or through ASGI send (off); on falls back to send by itself on a server it does "
        "not know, and for good after a failure (see /healthz wakeups.writes)"))
    token: SecretStr | None = Field(None, description="bearer token required for writes")
    insecure: bool = Field(False, description="allow a non-loopback listener without a token")
    producer_token: SecretStr | None = Field(None, description=(
        "bearer token producers need to register (X-Producer-Id), ask for and release "
        "credit grants and DELETE /producers (--token works too); none: anyone may"))
    max_producers_per_client: int | None = Field(None, ge=1, description=(
        "the most producer ids one client address may speak for within --producer-ttl; "
        "none: no cap"))
    default_flow_stop_threshold: int = Field(80, description="default stop, % of queue max")
    default_flow_resume_threshold: int = Field(70, description="default resume, % of queue max")
    default_queue_limit: int = Field(104857600, description="byte max of queues without one")
    broker_stats_lag: float = Field(10.0, ge=0, description=(
        "seconds the broker's depth figures lag behind at most (RabbitMQ's default 5 s "
        "statistics: up to about 10; deploy/rabbitmq.conf's 1 s: about 3); the sidecar "
        "uses the larger of this and the lag it measures; a poll's figures describe the "
        "moment its first request was sent less this"))
    warning_horizon: float | None = Field(None, description=(
        "seconds to its stop within which a filling queue is warned (0 to 86400; default "
        "30), below a queue's and its vhost's flow.warning_horizon"))
    warning_fraction: float | None = Field(None, description=(
        "share of a stop at or over which a queue is warned, in (0, 1] (default 0.9), "
        "below a queue's and its vhost's flow.warning_fraction"))
    live_depth: bool = Field(True, description=(
        "read the hot queues' depth over AMQP between polls (passive queue.declare); "
        "--no-live-depth: statistics only"))
    amqp_url: SecretStr | None = Field(None, description=(
        "AMQP URL for live depth (default: the management URL's host, port 5672, the "
        "management user and password); it must reach the management API's cluster"))
    live_interval: float = Field(0.05, gt=0, description="seconds between live depth rounds")
    live_budget: float = Field(5000.0, gt=0, description=(
        "passive declares per second at most; the queues closest to a crossing go first "
        "(5,000: 1,000 queues near their stop each read about every 200 ms)"))
    live_idle_budget: float = Field(100.0, ge=0, description=(
        "of --live-budget, passive declares per second for the watched queues outside the "
        "hot set, read in turn (each at least every watched / this seconds); 0: the hot "
        "set only"))
    live_band: float = Field(0.2, ge=0, description=(
        "share of its stop threshold within which a queue (its depth, or that depth "
        "projected over --broker-stats-lag + --poll-interval) is sampled live"))
    producer_ttl: float = Field(60.0, gt=0, description=(
        "seconds a producer stays active after its last flow request"))
    grant_lease: float = Field(3.0, gt=0, description=(
        "seconds a credit grant lasts unless its request asks otherwise; an unreleased "
        "grant blocks its credit this long, plus --broker-stats-lag"))
    grant_lease_max: float = Field(30.0, gt=0, description=(
        "the longest lease a credit grant request may ask for"))
    webhook_timeout: float = Field(5.0, gt=0, description="seconds a webhook POST may take")
    webhook_backoff_base: float = Field(0.5, gt=0, description=(
        "seconds: webhook retries wait up to base * 2^(attempt-1), with full jitter"))
    webhook_backoff_max: float = Field(60.0, gt=0, description="most seconds a webhook retry waits")
    webhook_give_up_after: float = Field(86400.0, gt=0, description=(
        "seconds after its transition an undelivered webhook event is marked failed"))
    webhook_concurrency: int = Field(8, ge=1, description=(
        "webhook streams (subscription x queue) delivered in parallel"))
    webhook_retention: float = Field(86400.0, ge=0, description=(
        "seconds delivered and failed webhook events stay listed in /webhooks/{id}/deliveries"))
    history_interval: float = Field(5.0, gt=0, description=(
        "seconds between history samples of a queue whose depth and state did not change"))
    history_retention_days: int = Field(7, ge=1, description=(
        "days of flow history kept (older date partitions are deleted)"))
    history_dir: Path | None = Field(None, description="flow history files (default: "
                                     "DATA_DIR/history)")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING, ...")
    # -- security and limits (docs/security.md) --
    allowed_hosts: str = Field("", description=(
        "more Host names the API answers to, comma-separated globs (`flow.example.com`, "
        "`*.svc.cluster.local`); the listen address and localhost names always are"))
    max_body_bytes: int = Field(65536, ge=1, description=(
        "largest request body accepted; larger ones are answered 413"))
    header_timeout: float = Field(10.0, gt=0, description=(
        "seconds a connection may take to send a request's headers; then it is closed"))
    body_timeout: float = Field(30.0, gt=0, description=(
        "seconds a request may take to send its body; then 408"))
    keep_alive_timeout: float = Field(5.0, gt=0, description=(
        "seconds an idle keep-alive connection stays open between requests"))
    max_connections: int = Field(20000, ge=1, description=(
        "open connections (or requests in progress, parked long-polls and streams "
        "included) beyond which new requests are answered 503"))
    webhook_allow_private: bool = Field(False, description=(
        "allow webhook targets on loopback and private networks (link-local, metadata and "
        "unspecified addresses stay refused)"))
    shared_state: Literal["local", "broker"] = Field("local", description=(
        "where settings, defaults, webhook subscriptions and flowStoppedCount live: this "
        "sidecar's database (local), or the broker's global parameters, shared by every "
        "replica reading the same cluster, with the database as a cache (broker)"))
    shared_amqp_url: Annotated[list[str], NoDecode] = Field([], description=(
        "with --shared-state broker: AMQP host:port of the cluster's nodes for the webhook "
        "delivery queue (repeat or comma-separate; default: each --management-url's host, "
        "port 5672); the management user and password log in"))
    shared_vhost: str = Field("/", description=(
        "with --shared-state broker: the vhost of the webhook delivery queue"))
    advertise_url: str | None = Field(None, description=(
        "with --shared-state broker: the URL other replicas reach this one's API at, to "
        "forward credit grant requests to the vhost's owner (default: http://LISTEN)"))

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]") or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def history_path(self) -> Path:
        return self.history_dir or self.data_dir / "history"

    @property
    def live_amqp_url(self) -> str:
        """--amqp-url, or the management URL's host on 5672 with the management login."""
        if self.amqp_url is not None:
            return self.amqp_url.get_secret_value()
        login = (quote(self.management_user, safe="") + ":" +
                 quote(self.management_password.get_secret_value(), safe=""))
        return f"amqp://{login}@{self.amqp_hosts()[0]}/%2F"

    def amqp_hosts(self) -> list[str]:
        """`host:5672` of each management URL's host (IPv6 in brackets): where its AMQP
        listener is unless an AMQP URL says otherwise."""
        hosts = [urlsplit(url).hostname or "127.0.0.1" for url in self.management_url]
        return [f"[{h}]:5672" if ":" in h else f"{h}:5672" for h in hosts]

    @property
    def default_policy(self) -> DefaultPolicy:
        return DefaultPolicy(
            stop_percent=self.default_flow_stop_threshold,
            resume_percent=self.default_flow_resume_threshold,
            queue_limit=self.default_queue_limit,
        )

    @property
    def startup_warning(self) -> dict[str, float]:
        """--warning-horizon and --warning-fraction as settings keys, those given."""
        return {key: value for key, value in ((WARNING_HORIZON, self.warning_horizon),
                                              (WARNING_FRACTION, self.warning_fraction))
                if value is not None}

    def prometheus_urls(self) -> list[str]:
        """--prometheus-url, or each management URL's host on rabbitmq_prometheus's default
        port (15692; 15691 with TLS)."""
        if self.prometheus_url:
            return self.prometheus_url
        urls = []
        for url in self.management_url:
            parts = urlsplit(url)
            host = parts.hostname or "127.0.0.1"
            port = 15691 if parts.scheme == "https" else 15692
            urls.append(f"{parts.scheme}://{f'[{host}]' if ':' in host else host}:{port}")
        return urls

    @field_validator("management_url", "shared_amqp_url", "prometheus_url", mode="before")
    @classmethod
    def _url_list(cls, value: object) -> object:
        """A variable or flag may hold several URLs separated by commas."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if ":" not in self.listen or not self.listen.rsplit(":", 1)[1].isdigit():
            raise ValueError(f"--listen={self.listen!r} must be host:port")
        if self.broker == "auto" and kind_of_url(self.management_url[0]) is None:
            raise ValueError(f"--management-url scheme names no broker (use one of "
                             f"{', '.join(sorted(SCHEMES))}, or say --broker)")
        kind = self.broker if self.broker != "auto" else kind_of_url(self.management_url[0])
        if self.shared_state == "broker" and kind != "rabbitmq":
            raise ValueError(f"--shared-state broker keeps the shared state in RabbitMQ's "
                             f"global parameters and a quorum queue: with a {kind} broker "
                             "use --shared-state local (and one replica)")
        problems = self.default_policy.problems() + [
            p.message.replace("flow.warning_", "--warning-")
            for p in warning_problems(self.startup_warning)]
        if problems:
            raise ValueError("; ".join(problems))
        if self.amqp_url is not None and urlsplit(
                self.amqp_url.get_secret_value()).scheme not in ("amqp", "amqps"):
            raise ValueError("--amqp-url must be an amqp:// or amqps:// URL")
        token = self.token.get_secret_value() if self.token is not None else None
        if token is not None and (not token or token != token.strip()):
            raise ValueError("--token must be non-empty and without surrounding spaces "
                             "(a client could never send it)")
        if not self.token and not self.insecure and not is_loopback(self.host):
            raise ValueError(
                f"--listen={self.listen} is not a loopback address: set --token (or "
                "FLOW_TOKEN) so that writes need it, or pass --insecure to accept the risk"
            )
        return self


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
