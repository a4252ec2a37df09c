"""What a watch of one destination knows from the sidecar's answers, and what it says about
them: shared by the blocking publisher's thread (`flowwatch`) and the asyncio publishers'
shared watch (`aio_watch`). No I/O, no waiting; the caller passes the time and holds its
own lock.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

from flow_sidecar_client.outage import DEFAULT_GRACE, Contact, Known, OnUnreachable, unreachable

log = logging.getLogger("flow_sidecar.client")


class Signal(enum.Enum):
    """What the sidecar last said about the destination."""

    GO = "go"
    STOP = "stop"
    UNKNOWN = "unknown"


class WatchState:
    """The last answer for one destination and the outage around it, if any."""

    def __init__(self, destination: str, *, on_unreachable: OnUnreachable = None,
                 grace: float = DEFAULT_GRACE) -> None:
        self.destination = destination
        self.on_unreachable = on_unreachable
        self.grace = grace
        self.version: int | None = None
        self.signal = Signal.UNKNOWN
        self._known = Known.NOTHING  # kept through an outage: what the policy obeys
        self._since: float | None = None  # when the current outage began
        self._refused = False  # the sidecar answers, but has no state for the destination
        self._reason = ""
        self._opened = False  # the fail-open WARNING of this outage was given

    def contact(self) -> Contact:
        return Contact(self._known, self._since, self._refused)

    def answered(self, answer: dict[str, Any], now: float) -> bool:
        """An answer came; False (and an outage) when it has no flow state in it."""
        try:
            stopped, version = bool(answer["flowStopped"]), int(answer["version"])
        except (KeyError, TypeError, ValueError) as exc:
            self.failed(f"unexpected answer: {type(exc).__name__}: {exc}", None, now)
            return False
        self.signal, self.version = (Signal.STOP if stopped else Signal.GO), version
        self._known = Known.STOP if stopped else Known.GO
        if self._since is not None:
            log.info("flow-sidecar answers again for %s; obeying flow control",
                     self.destination)
        self._since, self._refused, self._opened = None, False, False
        return True

    def failed(self, reason: str, status: int | None, now: float) -> None:
        """No flow state: the sidecar is away (`status` None or 5xx), or refuses (4xx)."""
        self.signal, self.version = Signal.UNKNOWN, None
        if self._since is not None:
            return
        self._since, self._reason = now, reason
        self._refused = not unreachable(status)
        if self._refused or self.on_unreachable is not None:
            action = ("holding messages" if self.on_unreachable == "block"
                      else "sending without flow control")
            log.warning("flow-sidecar gives no flow state for %s (%s); %s until it answers",
                        self.destination, reason, action)
            return
        last = {Known.GO: "flowing: at most a window of messages",
                Known.STOP: "stopped", Known.NOTHING: "nothing yet: holding messages"}
        log.info("flow-sidecar gives no flow state for %s (%s); obeying what it last said "
                 "(%s) for up to %gs", self.destination, reason, last[self._known], self.grace)

    def opened(self) -> None:
        """A publisher fails open after the grace period: say so, once per outage."""
        if self._opened or self._refused or self.on_unreachable is not None:
            return
        self._opened = True
        log.warning("flow-sidecar has given no flow state for %s for %gs (%s); sending "
                    "without flow control until it answers", self.destination, self.grace,
                    self._reason)
