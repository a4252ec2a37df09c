"""What a publisher may do while the sidecar does not answer: pure, for every publisher.

A sidecar restart, a rolling upgrade or a pod move is an ordinary event: failing open at
once lets every producer past the stop at full speed for as long as it lasts. So by default
a publisher keeps obeying what it last heard (docs/producers.md#when-the-sidecar-is-away):
a stopped destination stays stopped, a flowing one lets it send at most its window
(`capacity` messages, not counting those a held grant covers: a grant is spent to its size
and lease) before it must hear from the sidecar again, and nothing known means nothing
sent. Only once the outage has lasted `grace` seconds does it fail open. A publisher given
`on_unreachable="send"` or `"block"` keeps that meaning: fail open at once, or never. A
sidecar that answers but knows no flow state for the destination (a 4xx) is no outage:
`on_unreachable` decides, open unless "block", as it always did.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: Seconds without an answer before a publisher fails open: longer than a restart of the
#: sidecar (a few seconds) and than a grant's default lease (3 s), whose credit it may spend.
DEFAULT_GRACE = 10.0

OnUnreachable = Literal["send", "block"] | None
#: Seconds between attempts while the sidecar does not answer: doubling up to the max.
RETRY_FIRST, RETRY_MAX = 0.25, 2.0


class Verdict(enum.Enum):
    """What the publisher does with its next message."""

    SEND = "send"            # flow control allows it (credit rules as usual)
    WINDOW = "window"        # an outage: send, counting it against the window unless granted
    GRANTED_ONLY = "granted"  # an outage, the window spent: only on a grant still held
    HOLD = "hold"            # stopped, or nothing known
    OPEN = "open"            # fail open: send without flow control


class Spent(enum.Enum):
    """What a publisher's credit found for one message."""

    GRANT = "grant"  # a held grant covers it
    NONE = "none"    # no credit: an ask is under way (or grants are required)
    FREE = "free"    # grants are not in charge here (off, an older sidecar, a refusal)
    AWAY = "away"    # the sidecar does not answer and no grant is left: the policy decides


class Known(enum.Enum):
    """What the sidecar last said of the destination."""

    GO = "go"
    STOP = "stop"
    NOTHING = "nothing"  # it never answered


@dataclass(frozen=True)
class Contact:
    """The sidecar's last word and since when (monotonic s) it has given no flow state, if
    so; `refused`: it answers but has none for the destination (a 4xx: not an outage)."""

    known: Known
    unreachable_since: float | None = None
    refused: bool = False


def decide(contact: Contact, now: float, unheard: int, capacity: int, *,
           grace: float = DEFAULT_GRACE, on_unreachable: OnUnreachable = None) -> Verdict:
    """The verdict for one message; `unheard`: messages sent without a grant since the
    outage began."""
    if contact.unreachable_since is None:
        return Verdict.HOLD if contact.known is Known.STOP else Verdict.SEND
    if contact.refused:  # as before there was an outage policy: on_unreachable decides
        return Verdict.HOLD if on_unreachable == "block" else Verdict.OPEN
    if on_unreachable == "send":
        return Verdict.OPEN
    if on_unreachable == "block":
        return Verdict.HOLD
    if now - contact.unreachable_since >= grace:
        return Verdict.OPEN
    if contact.known is not Known.GO:
        return Verdict.HOLD
    return Verdict.WINDOW if unheard < capacity else Verdict.GRANTED_ONLY


def unreachable(status: int | None) -> bool:
    """Whether an HTTP outcome means the sidecar is away (no answer; a 5xx of a restart, a
    proxy or a graceful stop), not that it refused this destination (a 4xx)."""
    return status is None or status >= 500


def check_on_unreachable(on_unreachable: object, grace: float) -> None:
    """Refuse a setting of the policy, naming it (ValueError)."""
    if on_unreachable not in ("send", "block", None):
        raise ValueError("on_unreachable must be 'send', 'block' or None (obey what was "
                         f"last known, then fail open), not {on_unreachable!r}")
    if grace < 0:
        raise ValueError(f"unreachable_grace must be at least 0 s, not {grace}")


class OutageWindow:
    """One publisher's side of the policy: its window, and what it sent without a grant
    since the current outage began. The caller serializes its sends."""

    def __init__(self, capacity: int, grace: float = DEFAULT_GRACE,
                 on_unreachable: OnUnreachable = None) -> None:
        check_on_unreachable(on_unreachable, grace)
        self.capacity = capacity
        self.grace = grace
        self.on_unreachable = on_unreachable
        self._outage: float | None = None
        self._unheard = 0

    def verdict(self, contact: Contact, now: float) -> Verdict:
        if contact.unreachable_since != self._outage:  # heard again, or a new outage
            self._outage, self._unheard = contact.unreachable_since, 0
        return decide(contact, now, self._unheard, self.capacity, grace=self.grace,
                      on_unreachable=self.on_unreachable)

    @staticmethod
    def allows(verdict: Verdict, spent: Spent) -> bool:
        """Whether a message with this verdict and this credit goes. The watch hears the
        sidecar (SEND) but the grants did not: hold until they are back (a second or two),
        rather than send on long-poll alone."""
        if spent is Spent.GRANT:
            return verdict is not Verdict.HOLD
        if spent is Spent.NONE or verdict in (Verdict.HOLD, Verdict.GRANTED_ONLY):
            return False
        return spent is Spent.FREE or verdict is not Verdict.SEND

    def admit(self, verdict: Verdict, spend: Callable[[], Spent], required: bool) -> Spent | None:
        """The credit one message goes with (`spend` asked only when credit is in charge:
        not once failed open, unless grants are required), or None: it may not go now."""
        spent = Spent.FREE if verdict is Verdict.OPEN and not required else spend()
        return spent if self.allows(verdict, spent) else None

    def sent(self, verdict: Verdict, spent: Spent) -> None:
        if verdict is Verdict.WINDOW and spent is not Spent.GRANT:
            self._unheard += 1
