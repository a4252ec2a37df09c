"""The sidecar's configuration: one Settings class, from flags and FLOW_* environment variables.

Every option of SPEC §9 is a field; pydantic-settings gives each a `--kebab-case` flag and a
`FLOW_UPPER_CASE` environment variable (flags win). Start-up refuses combinations an
operator would regret: qpidd's invalid default percentages, and a non-loopback listener
without a token unless `--insecure` says so.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    management_url: str = Field("http://127.0.0.1:15672", description="broker management API")
    management_user: str = Field("guest", description="management API user")
    management_password: SecretStr = Field(SecretStr("guest"), description="its password")
    data_dir: Path = Field(Path("./data"), description="SQLite database and history files")
    poll_interval: float = Field(1.0, gt=0, description="seconds between broker polls")
    request_timeout: float = Field(5.0, gt=0, description="seconds before a broker read fails")
    stale_after: float = Field(10.0, gt=0, description="seconds without a sample before stale")
    on_stale: Literal["hold", "stop", "go"] = Field(
        "hold", description="what producers are told about stale queues"
    )
    token: SecretStr | None = Field(None, description="bearer token required for writes")
    insecure: bool = Field(False, description="allow a non-loopback listener without a token")
    default_flow_stop_threshold: int = Field(80, description="default stop, % of queue max")
    default_flow_resume_threshold: int = Field(70, description="default resume, % of queue max")
    default_queue_limit: int = Field(104857600, description="byte max of queues without one")
    broker_stats_lag: float = Field(2.0, ge=0, description=(
        "seconds the broker's depth figures lag behind (deploy/rabbitmq.conf: about 2); "
        "with --poll-interval, how long a stop takes to reach producers"))
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
    def default_policy(self) -> DefaultPolicy:
        return DefaultPolicy(
            stop_percent=self.default_flow_stop_threshold,
            resume_percent=self.default_flow_resume_threshold,
            queue_limit=self.default_queue_limit,
        )

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if ":" not in self.listen or not self.listen.rsplit(":", 1)[1].isdigit():
            raise ValueError(f"--listen={self.listen!r} must be host:port")
        problems = self.default_policy.problems()
        if problems:
            raise ValueError("; ".join(problems))
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


def without_credentials(url: str) -> str:
    """`url` fit for a log line: any user:password@ in it replaced by ***@."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
