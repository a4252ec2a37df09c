"""The accounting of a publisher's credit grants, shared by the blocking and the asyncio
publishers: what is held, spent, given back and asked for next. No I/O and no waiting; the
shells (`credit.CreditLine`, a thread; `aio_credit.AsyncCreditLine`, a task) send the asks
and releases it computes, under their own lock, and are woken through `wake`.

How grants are used and sized is the `credit` module's docstring.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from flow_sidecar_client.outage import RETRY_FIRST, RETRY_MAX, Spent, unreachable

log = logging.getLogger("flow_sidecar.client")

GrantsMode = Literal["auto", "off", "required"]
#: Seconds the sidecar may hold an ask while it has no credit to give.
ASK_WAIT = 1.0
#: Seconds before a grant's deadline that it stops being used (the last message must
#: reach the broker before the sidecar's lease ends).
USE_MARGIN = 0.05
#: Seconds between asks to a sidecar without grants, to notice an upgrade.
REPROBE = 30.0
#: Extra seconds an HTTP request may take beyond the time the sidecar may hold it.
REQUEST_MARGIN = 5.0
#: Seconds of the publisher's recent rate a grant is sized for (at least `capacity`).
SIZE_FOR = 0.1
#: The largest grant asked for, in multiples of `capacity`.
SPAN_MAX = 8


class Access(enum.Enum):
    """Whether the sidecar grants credit."""

    PENDING = "pending"          # not asked yet
    GRANTS = "grants"            # it does
    UNSUPPORTED = "unsupported"  # an older sidecar, without /grants
    UNAVAILABLE = "unavailable"  # no answer, an unknown destination, or a refusal


@dataclass(frozen=True)
class Reply:
    """An HTTP answer (status None: none came) and its JSON body, if any."""

    status: int | None
    body: dict[str, Any] | None
    error: str = ""


def unsupported(reply: Reply) -> bool:
    """The sidecar has no such route (an older version): the framework's own 404/405."""
    detail = (reply.body or {}).get("detail")
    return reply.status in (404, 405) and detail in ("Not Found", "Method Not Allowed")


@dataclass
class Held:
    """One grant and how much of it this publisher spent."""

    id: str
    messages: int
    bytes: int | None
    deadline: float  # monotonic; taken from before the ask was sent
    lease: float
    used_messages: int = 0
    used_bytes: int = 0
    last_tag: int | None = None  # the delivery tag of its last message, if the sender says

    def fits(self, size: int) -> bool:
        return self.used_messages < self.messages and (
            self.bytes is None or self.used_bytes + size <= self.bytes)

    @property
    def left(self) -> int:
        return self.messages - self.used_messages

    def spent(self, confirmed: bool = False) -> dict[str, Any]:
        """The release of this grant; `confirmed`: every message sent with it was."""
        given = {"grantId": self.id, "usedMessages": self.used_messages,
                 "usedBytes": self.used_bytes}
        return {**given, "confirmed": True} if confirmed else given


@dataclass(frozen=True)
class Ask:
    """What the shell sends next: an ask for `want` messages (0: only the releases)."""

    want: int
    largest: int
    give_back: list[dict[str, Any]]

    def body(self) -> dict[str, Any]:
        return {"messages": self.want, "bytes": self.want * max(self.largest, 1),
                "wait": ASK_WAIT, "release": self.give_back}


class CreditLedger:
    """Credit for one destination. The shell holds its lock around every call."""

    def __init__(self, capacity: int, destination: str, mode: GrantsMode,
                 clock: Callable[[], float]) -> None:
        if mode not in ("auto", "off", "required"):
            raise ValueError(f"grants must be 'auto', 'off' or 'required', not {mode!r}")
        self.capacity = capacity
        self.destination = destination
        self.mode = mode
        self.clock = clock
        self.access = Access.UNSUPPORTED if mode == "off" else Access.PENDING
        self.away = False  # UNAVAILABLE because the sidecar did not answer (not a refusal)
        self.starved = False  # a take() found no credit: ask now
        self.stopping = False
        self.wake: Callable[[], None] = lambda: None  # the shell's: look at `due` again
        self._held: list[Held] = []
        self._unconfirmed: list[Held] = []  # spent, waiting for their messages' confirms
        self._done: list[dict[str, Any]] = []  # spent grants to give back
        self._tags = False  # the sender says delivery tags (take) and confirms (confirmed)
        self._confirmed_before = 1  # every delivery tag below this one is confirmed
        self._largest = 0  # the largest message so far sizes byte asks
        self._active = False  # took credit since the last ask
        self._taken = 0  # messages taken since `_since`, the last ask: the recent rate
        self._since = clock()
        self._retry_at = 0.0
        self._retry = RETRY_FIRST

    # -- the send path -----------------------------------------------------------------
    def spend(self, size: int, tag: int | None = None) -> Spent:
        """Spend credit for one message of `size` body bytes, to be sent with delivery tag
        `tag` (if the sender tracks confirms). A grant still held is spent whatever the
        sidecar does now: its lease is the sidecar's promise."""
        self._largest = max(self._largest, size)
        now = self.clock()
        for held in self._held:
            if now < held.deadline - USE_MARGIN and held.fits(size):
                held.used_messages += 1
                held.used_bytes += size
                self._taken += 1
                if tag is not None:
                    held.last_tag, self._tags = tag, True
                self._active = True
                if self._wants_more() or any(self._retiring(h, now) for h in self._held):
                    self.wake()  # ask for the next one / give it back
                return Spent.GRANT
        if self.access in (Access.UNSUPPORTED, Access.UNAVAILABLE):
            if self.mode == "required":
                return Spent.NONE
            return Spent.AWAY if self.away else Spent.FREE
        self.starved = True
        self.wake()
        return Spent.NONE

    def take(self, size: int, tag: int | None = None) -> bool:
        """`spend`, as whether the message may go without asking the outage policy."""
        return self.spend(size, tag) is not Spent.NONE

    def confirmed(self, before: int) -> None:
        """Every delivery tag below `before` is confirmed: grants spent on them may go."""
        self._confirmed_before = before
        if any(self._settled(h) for h in self._unconfirmed):
            self.wake()

    def _settled(self, held: Held) -> bool:
        return held.last_tag is None or held.last_tag < self._confirmed_before

    def expect(self) -> None:
        """A sender waits for flow control to end: keep an ask parked at the sidecar, so
        credit comes with the resume instead of a round trip after it."""
        if self.access in (Access.PENDING, Access.GRANTS) and not self._held:
            self.starved = True
            self.wake()

    # -- what the shell sends --------------------------------------------------------------
    def _retire_at(self, held: Held) -> float:
        """When a grant is given back unfinished: early enough that the release reaches
        the sidecar before the lease ends (else all of it counts as used)."""
        return held.deadline - USE_MARGIN - min(1.0, 0.3 * held.lease)

    def _retiring(self, held: Held, now: float) -> bool:
        """Whether `held` is spent, too small for the largest message, or near its end."""
        return (held.left == 0 or now >= self._retire_at(held)
                or (held.bytes is not None and held.bytes - held.used_bytes < self._largest))

    def _retire(self, now: float) -> None:
        """Move grants that are `_retiring` out of use, and give back those whose messages
        are all confirmed (or whose lease is over: the sidecar took them as sent)."""
        keep: list[Held] = []
        for held in self._held:
            (self._unconfirmed if self._retiring(held, now) else keep).append(held)
        self._held = keep
        waiting = []
        for held in self._unconfirmed:
            if self._tags and self._settled(held):
                self._done.append(held.spent(confirmed=True))
            elif not self._tags or now >= held.deadline - USE_MARGIN:
                self._done.append(held.spent())
            else:
                waiting.append(held)
        self._unconfirmed = waiting

    def due(self) -> bool:
        """Whether the shell has something to send now."""
        if self.stopping:
            return True
        if self.access in (Access.UNSUPPORTED, Access.UNAVAILABLE):
            return self.clock() >= self._retry_at
        self._retire(self.clock())
        return self._wants_more() or bool(self._done)

    def _wants_more(self) -> bool:
        """Ask for the next grant: none is held, or one and less than a whole grant's
        worth (`capacity`) is left in it."""
        low = self._active and sum(h.left for h in self._held) < self._size
        return (self.starved or low) and self._holding() < 2

    @property
    def _size(self) -> int:
        """The grant to ask for: `capacity`, or SIZE_FOR seconds of the rate since the last
        ask where that is more (at most SPAN_MAX x capacity)."""
        elapsed = self.clock() - self._since
        recent = self._taken * SIZE_FOR / elapsed if elapsed > 0 else 0.0
        return max(self.capacity, min(SPAN_MAX * self.capacity, math.ceil(recent)))

    def _holding(self) -> int:
        """Grants the sidecar counts as held: in use, or spent and not given back yet (it
        lets one producer hold two on a queue)."""
        return len(self._held) + len(self._unconfirmed)

    def next_check(self) -> float:
        """Seconds until `due` may change by itself."""
        now = self.clock()
        times = [self._retire_at(h) for h in self._held]
        times += [h.deadline - USE_MARGIN for h in self._unconfirmed]
        if self.access in (Access.UNSUPPORTED, Access.UNAVAILABLE):
            times.append(self._retry_at)
        return max(0.01, min([t - now for t in times], default=1.0))

    def next_ask(self) -> Ask:
        """What to send now that `due` said so; on stopping, everything held goes back."""
        stopping = self.stopping
        give_back, self._done = self._done, []
        if stopping:
            give_back += [h.spent(self._tags and self._settled(h)) for h in
                          self._held + self._unconfirmed]
            self._held, self._unconfirmed = [], []
        want = 0 if stopping or self._holding() > 1 else self._size
        if not (self.starved or self._active or self.access is not Access.GRANTS):
            want = 0  # idle: only give back
        if want:
            self._taken, self._since = 0, self.clock()
        self._active = False
        return Ask(want, self._largest, give_back)

    # -- what came back --------------------------------------------------------------------
    def answered(self, reply: Reply, sent_at: float) -> None:
        """The answer to an ask sent at `sent_at` (the shell's clock)."""
        answer = reply.body or {}
        if reply.status == 200 and isinstance(answer.get("messages"), int):
            self._granted(answer, sent_at)
        else:
            self._refused(reply)
        self.wake()

    def _granted(self, answer: dict[str, Any], sent_at: float) -> None:
        if self.access is not Access.GRANTS and self.access is not Access.PENDING:
            # said at the level its absence was (see _refused)
            log.log(self._level(self.access), "flow-sidecar grants credit for %s again",
                    self.destination)
        self.access, self.away = Access.GRANTS, False
        self._retry = RETRY_FIRST
        if answer.get("grantId") and answer["messages"] > 0:
            lease = float(answer.get("leaseSeconds", 0))
            held = Held(str(answer["grantId"]), int(answer["messages"]), answer.get("bytes"),
                        sent_at + lease, lease)
            if self.stopping:
                self._done.append(held.spent())
            else:
                self._held.append(held)
                self.starved = False

    def _level(self, access: Access) -> int:
        """How loudly to say that grants are `access` (or back from it): in "auto" an
        unreachable sidecar is the flow watcher's business already."""
        if self.mode == "required":
            return logging.WARNING
        return logging.INFO if access is Access.UNSUPPORTED else logging.DEBUG

    def _refused(self, reply: Reply) -> None:
        if unsupported(reply):
            access, wait = Access.UNSUPPORTED, REPROBE
            reason = "it has no credit grants (an older version)"
        else:
            access, wait = Access.UNAVAILABLE, self._retry
            self._retry = min(self._retry * 2, RETRY_MAX)
            detail = (reply.body or {}).get("detail")
            reason = reply.error or f"{reply.status}: {detail}"
        if access is not self.access:
            level = self._level(access)
            then = ("holding messages" if self.mode == "required" else
                    "long-poll flow control alone applies" if access is Access.UNSUPPORTED
                    else "flow control works as without grants")
            log.log(level, "flow-sidecar gives %s no credit grant (%s); %s until it does",
                    self.destination, reason, then)
        self.access = access
        self.away = access is Access.UNAVAILABLE and unreachable(reply.status)
        self._retry_at = self.clock() + wait
        self.starved = False  # spend() now answers from the mode; wake waiting senders
