"""How long a blocked `publish()` waits on flow control and what it says meanwhile: Qpid's
client's schedule and wording (seed 002), pure.

Qpid's client warns `Broker enforced flow control has been enforced` when a stop first
holds a send back, `Message send delayed by 5s due to broker enforced flow control` every
`qpid.flow_control_wait_notify_period` (5000 ms), and after `qpid.flow_control_wait_failure`
(120000 ms) logs and throws `Message send failed due to timeout waiting on broker enforced
flow control`. `FlowWait` is that schedule for one send; `WaitSettings` the two periods,
from code, the environment or Qpid's defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from flow_sidecar_client.confirms import PublishError

#: Qpid's defaults for qpid.flow_control_wait_notify_period and _wait_failure (ms).
NOTIFY_PERIOD_MS, WAIT_FAILURE_MS = 5_000, 120_000


class FlowControlTimeout(PublishError):
    """The destination stayed flow-stopped for `flow_control_wait_failure` ms; the message
    was not sent and may be sent again."""

    MESSAGE = "Message send failed due to timeout waiting on broker enforced flow control"


class FlowStopped(PublishError):
    """The destination is flow stopped and the sender chose not to wait (the Celery
    integration's `mode="raise"`); the message was not sent. `queues`: the queues that
    stop it (the destination's own, or those an exchange route reaches)."""

    def __init__(self, destination: str, queues: tuple[str, ...] = ()) -> None:
        named = ", ".join(repr(q) for q in queues)
        by = f" by queue {named}" if len(queues) == 1 else f" by queues {named}" if queues \
            else ""
        super().__init__(f"{destination} is flow stopped{by}; the message was not sent")
        self.destination = destination
        self.queues = queues


#: Qpid's client's first warning when the broker enforces flow control (seed 002).
ENFORCED = "Broker enforced flow control has been enforced"


def _setting_ms(value: int | None, env_name: str, environ: Mapping[str, str], default: int,
                minimum: int) -> int:
    """An explicit value, else the environment variable, else the default; checked."""
    if value is None:
        raw = environ.get(env_name)
        try:
            value = default if raw is None else int(raw)
        except ValueError:
            raise ValueError(f"{env_name}={raw!r} is not a whole number of milliseconds")\
                from None
    if value < minimum:
        raise ValueError(f"{env_name.lower()} must be at least {minimum} ms, not {value}")
    return value


@dataclass(frozen=True)
class WaitSettings:
    """How long `publish()` waits on flow control and how often it says so (ms)."""

    notify_period_ms: int = NOTIFY_PERIOD_MS
    failure_ms: int = WAIT_FAILURE_MS

    @classmethod
    def resolve(cls, notify_period_ms: int | None, failure_ms: int | None,
                environ: Mapping[str, str]) -> WaitSettings:
        """Code beats environment beats Qpid's defaults. A failure of 0 gives up at once."""
        return cls(
            _setting_ms(notify_period_ms, "FLOW_CONTROL_WAIT_NOTIFY_PERIOD", environ,
                        NOTIFY_PERIOD_MS, 1),
            _setting_ms(failure_ms, "FLOW_CONTROL_WAIT_FAILURE", environ, WAIT_FAILURE_MS, 0))


class FlowWait:
    """The schedule of one blocked `publish()`: a notice at every multiple of the notify
    period before the failure time, then the timeout. Times are the caller's clock (s)."""

    def __init__(self, settings: WaitSettings, started: float) -> None:
        self.settings = settings
        self.started = started
        self.notified = 0

    def _notice_at(self, k: int) -> float:
        return self.started + k * self.settings.notify_period_ms / 1000

    @property
    def deadline(self) -> float:
        return self.started + self.settings.failure_ms / 1000

    def next_event(self) -> float:
        """When something is next due: a notice or the timeout."""
        return min(self._notice_at(self.notified + 1), self.deadline)

    def notices(self, now: float) -> list[str]:
        """Notices due by `now` and not yet given (several if the caller was late)."""
        due = []
        while (at := self._notice_at(self.notified + 1)) <= now and at < self.deadline:
            self.notified += 1
            delay = self.notified * self.settings.notify_period_ms / 1000
            due.append(f"Message send delayed by {delay:g}s due to broker enforced flow "
                       "control")
        return due

    def expired(self, now: float) -> bool:
        return now >= self.deadline

    def tick(self, now: float, log: logging.Logger) -> None:
        """Log the notices due by `now`; past the deadline, log and raise the timeout."""
        for notice in self.notices(now):
            log.warning(notice)
        if self.expired(now):
            log.error(FlowControlTimeout.MESSAGE)
            raise FlowControlTimeout(FlowControlTimeout.MESSAGE)
