"""Credit grants: a hard bound on queue depth although depth is only sampled.

Long-poll tells producers to stop once the sidecar *sees* a crossing, which over RabbitMQ
is seconds after it happened; everything sent meanwhile overshoots. Grants close that gap:
a producer asks for permission to send up to N messages / B bytes to a destination (a
queue, or every queue an exchange routes a key to), and the sidecar grants no more than it
can promise. Per queue and watched dimension it keeps

    sampled depth + outstanding credit <= stop threshold

where outstanding credit is every live grant in full (its holder may spend it at any
moment) plus credit already spent that the depth sample cannot show yet ("in flight"). A
sample describes the queue as it was at some moment (`Destination.as_of`: RabbitMQ's
figures are up to `--broker-stats-lag` seconds old when read); spent credit leaves the
ledger once a sample describes a moment after it was spent, because from then on depth
counts those messages. So nothing is counted twice and nothing sent is missed.

Spent credit the holder says was *confirmed* by the broker (publisher confirms: every
message is in the queue, or was consumed from it, by the time of the release) also leaves
the message count at the first upper bound of the queue's messages (`Destination.bound`,
a `DepthBound` from live samples) whose moment is after it was spent: such a bound counts
those messages. A bound is used only when it is at least as new as the depth sample (what
that sample settled is in the bound too), and only where it gives the smaller total.
Unconfirmed credit, bytes and queues without a bound keep the sample-age rule above.

Grants are leases. A holder releases a grant saying how much it used, and the rest returns
at once. A grant not released by the end of its lease is taken as fully used at that moment
(its holder may have sent all of it, then died): its credit returns with the first sample
describing a moment after the lease ended. Nothing is granted while a destination is flow
stopped, has no depth sample yet, or is unknown. Headroom (stop - depth) is shared fairly
*per producer*, not per request: a grant is at most a 1/n share of it (at least one message
while any is free) minus what the asking producer already holds on the queue, n being the
producers active on the queue (holding a grant or having asked within `ask_window`), and a
producer holds at most `MAX_HELD` grants on a queue. So asking again and again gains a
producer nothing: a greedy one cannot keep an active one below its share. Only the producer
a grant was made to may release it (`foreign_release`).

With replicas, credit another replica granted on a queue is not in this ledger; its record
says by when it is spent (`Destination.foreign_until`), and nothing is granted on the queue
until its depth sample describes a later moment (`sidecar.cluster.grant_owners`).

Thresholds are taken as they are when a grant is made: lowering a stop, or adding a size
stop, cannot take back credit already granted (nor messages already queued).

Pure: no I/O, no clock; the shell (`sidecar.signals.grant_desk`) owns the one ledger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sidecar.flow.depth_bound import DepthBound
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Thresholds
from sidecar.model import QueueKey

#: Grants one producer may hold on one queue at once (the publisher holds two at most: the
#: one it spends and the next, asked for before the first runs out).
MAX_HELD = 2


@dataclass(frozen=True)
class Grant:
    """Credit one producer holds on a set of queues until it releases it or `expires_at`.
    `bytes` is None when no destination watched size at grant time (no byte limit)."""

    id: str
    producer: str
    queues: frozenset[QueueKey]
    messages: int
    bytes: int | None
    expires_at: float


@dataclass(frozen=True)
class InFlight:
    """Credit spent (or taken as spent) on a queue: every message it counts was sent by
    `sent_by`, so a depth sample describing any later moment includes them. `confirmed`:
    the broker had confirmed them all by then (an upper bound of any later moment counts
    them too)."""

    messages: int
    bytes: int
    sent_by: float
    confirmed: bool = False


@dataclass(frozen=True)
class Ledger:
    """What is granted and not yet visible in depth, and who asked lately (fairness).
    Treated as immutable: every operation returns a new ledger."""

    grants: Mapping[str, Grant] = field(default_factory=dict)
    in_flight: Mapping[QueueKey, tuple[InFlight, ...]] = field(default_factory=dict)
    asked: Mapping[QueueKey, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Destination:
    """One queue a grant would cover, as the flow engine sees it. `as_of` is the moment its
    `depth` describes (None without a sample); `known` is False for a queue the sidecar
    has not seen (a binding to a queue declared since the last poll); `bound` settles
    confirmed credit (see the module docstring); `foreign_until`: credit outside this
    ledger (another replica's) may be spent until then."""

    key: QueueKey
    thresholds: Thresholds
    depth: Depth | None
    as_of: float | None
    stopped: bool
    known: bool = True
    bound: DepthBound | None = None  # the newest upper bound of its messages, if any
    foreign_until: float | None = None


@dataclass(frozen=True)
class Ask:
    """A request for credit. `bytes` may be None only where no destination watches size."""

    producer: str
    messages: int
    bytes: int | None
    lease: float


@dataclass(frozen=True)
class Decision:
    """What was granted (0 messages: nothing, no grant) and, when less than asked, why."""

    messages: int
    bytes: int | None
    grant: Grant | None
    limited_by: str | None


@dataclass(frozen=True)
class Outstanding:
    """Credit that a queue's last depth sample does not show: held grants plus in flight."""

    messages: int
    bytes: int


def outstanding(ledger: Ledger, key: QueueKey, as_of: float | None,
                bound_at: float | None = None) -> Outstanding:
    """Credit on `key` beyond a depth sample that describes the moment `as_of` (and, for
    messages, beyond an upper bound at `bound_at`, no older than that sample)."""
    held = [g for g in ledger.grants.values() if key in g.queues]
    flying = [f for f in ledger.in_flight.get(key, ()) if as_of is None or f.sent_by > as_of]
    unbounded = [f for f in flying if not (
        bound_at is not None and f.confirmed and f.sent_by < bound_at)]
    return Outstanding(sum(g.messages for g in held) + sum(f.messages for f in unbounded),
                       sum(g.bytes or 0 for g in held) + sum(f.bytes for f in flying))


def message_evidence(ledger: Ledger, d: Destination) -> tuple[int, int]:
    """(depth, outstanding credit) in messages for a destination with a depth sample: from
    the sample, or from its upper bound where that gives the smaller total."""
    assert d.depth is not None
    out = outstanding(ledger, d.key, d.as_of).messages
    best = (d.depth.messages, out)
    if d.bound is not None and d.as_of is not None and d.bound.at >= d.as_of:
        via = outstanding(ledger, d.key, d.as_of, d.bound.at).messages
        if d.bound.messages + via < sum(best):
            best = (d.bound.messages, via)
    return best


def active_producers(ledger: Ledger, key: QueueKey, now: float, ask_window: float) -> set[str]:
    """Producers holding a grant on `key` or having asked for one within `ask_window`."""
    holders = {g.producer for g in ledger.grants.values() if key in g.queues}
    askers = {p for p, at in ledger.asked.get(key, {}).items() if now - at <= ask_window}
    return holders | askers


def missing_bytes(nbytes: int | None, destinations: list[Destination]) -> str | None:
    """Why an ask must say how many bytes it will send (a destination watches size), or
    None. Without it a grant could not bound the bytes, and reserving a share of the byte
    headroom "just in case" would lock others out of it."""
    if nbytes is not None:
        return None
    for d in destinations:
        if d.known and d.thresholds.size is not None:
            return (f"say how many bytes you will send: queue {d.key[1]!r} has a size stop "
                    f"(qpid.flow_stop_size={d.thresholds.size.stop})")
    return None


def grant(ledger: Ledger, ask: Ask, destinations: list[Destination], grant_id: str,
          now: float, ask_window: float) -> tuple[Decision, Ledger]:
    """Grant what `ask` may have of every destination's headroom, now: no more than any
    destination can take on top of its depth and outstanding credit in any watched
    dimension, no more than a fair share. With no destination (an exchange that routes the
    key nowhere) nothing needs protecting and the ask is granted as made. ValueError when
    `missing_bytes` says the ask lacks its bytes: nothing is granted, and that is why (the
    shell refuses such asks with a 422 first; a size stop may appear while one waits)."""
    problem = missing_bytes(ask.bytes, destinations)
    if problem is not None:
        return Decision(0, None, None, problem), ledger
    noted = note_ask(ledger, ask.producer, [d.key for d in destinations], now)
    messages, nbytes, why = _room(noted, ask, destinations, now, ask_window)
    if messages <= 0 or (nbytes is not None and nbytes <= 0):
        return Decision(0, 0 if nbytes is not None else None, None, why), noted
    made = Grant(grant_id, ask.producer, frozenset(d.key for d in destinations), messages,
                 nbytes, now + ask.lease)
    return (Decision(messages, nbytes, made, why),
            replace(noted, grants={**noted.grants, grant_id: made}))


def note_ask(ledger: Ledger, producer: str, keys: list[QueueKey], now: float) -> Ledger:
    """`producer` asked for credit on `keys` at `now`: it counts in their fair shares for
    `ask_window`, granted or not."""
    asked = dict(ledger.asked)
    for key in keys:
        asked[key] = {**asked.get(key, {}), producer: now}
    return replace(ledger, asked=asked)


def _room(ledger: Ledger, ask: Ask, destinations: list[Destination], now: float,
          ask_window: float) -> tuple[int, int | None, str | None]:
    """(messages, bytes, why less than asked) that every destination can take."""
    messages, nbytes, why = ask.messages, ask.bytes, None
    per_message = math.ceil(ask.bytes / ask.messages) if ask.bytes else 1
    for d in destinations:
        name = d.key[1]
        if not d.known:
            return 0, 0, f"queue {name!r} is not known to the sidecar yet"
        if d.stopped:
            return 0, 0, f"queue {name!r} is flow stopped"
        if not d.thresholds.enabled:
            continue
        if d.depth is None:
            return 0, 0, f"queue {name!r} has no depth sample yet"
        if d.foreign_until is not None and (d.as_of is None or d.as_of <= d.foreign_until):
            return 0, 0, (f"queue {name!r}: credit another replica granted may be spent "
                          f"until {max(d.foreign_until - now, 0):.1f} s from now; granted "
                          f"once depth shows it")
        mine = [g for g in ledger.grants.values()
                if g.producer == ask.producer and d.key in g.queues]
        if len(mine) >= MAX_HELD:
            return 0, 0, (f"queue {name!r}: producer {ask.producer!r} holds {len(mine)} "
                          f"grants on it already (at most {MAX_HELD}): release one first")
        out = outstanding(ledger, d.key, d.as_of)
        n = len(active_producers(ledger, d.key, now, ask_window) | {ask.producer})
        count, size = d.thresholds.count, d.thresholds.size
        if count is not None:
            cap, reason = _cap(count.stop, *message_evidence(ledger, d), n, 1, "messages",
                               sum(g.messages for g in mine))
            if cap < messages:
                messages, why = max(cap, 0), f"queue {name!r}: {reason}"
        if size is not None and nbytes is not None:  # missing_bytes: never None here
            known = size.stop if d.depth.bytes is None else d.depth.bytes  # unknown: no room
            cap, reason = _cap(size.stop, known, out.bytes, n, per_message, "bytes",
                               sum(g.bytes or 0 for g in mine))
            if cap < nbytes:
                nbytes, why = max(cap, 0), f"queue {name!r}: {reason}"
    return messages, nbytes, why


def _cap(stop: int, depth: int, out: int, producers: int, least: int, unit: str,
         mine: int) -> tuple[int, str]:
    """The most one grant may take in one dimension of one queue, and why: what is free,
    at most a fair share less what the asking producer holds (`mine`) already."""
    headroom = stop - depth
    free = headroom - out
    fair = max(least, headroom // producers)
    share = fair - mine
    if free <= share:
        return free, (f"{max(free, 0):,} of {stop:,} {unit} free (depth {depth:,}, "
                      f"{out:,} granted or in flight)")
    held = f", less the {mine:,} this producer holds" if mine else ""
    return share, (f"a fair share of {headroom:,} {unit} of headroom among {producers} "
                   f"producers{held}")


def foreign_release(ledger: Ledger, grant_id: str, producer: str) -> str | None:
    """Why `producer` may not release `grant_id` (it was granted to another), or None. A
    release frees credit, so only the grant's holder may say it is done with it."""
    held = ledger.grants.get(grant_id)
    if held is None or held.producer == producer:
        return None
    return (f"grant {grant_id!r} was granted to another producer: only the X-Producer-Id "
            f"it was granted to may release it")


def release_problem(ledger: Ledger, grant_id: str, used_messages: int | None,
                    used_bytes: int | None) -> tuple[str, str] | None:
    """(field, message) when a release claims more than was granted, else None."""
    held = ledger.grants.get(grant_id)
    if held is None:
        return None
    if used_messages is not None and used_messages > held.messages:
        return "usedMessages", (f"usedMessages={used_messages} is more than the "
                                f"{held.messages} messages granted")
    if used_bytes is not None and held.bytes is not None and used_bytes > held.bytes:
        return "usedBytes", f"usedBytes={used_bytes} is more than the {held.bytes} bytes granted"
    return None


def release(ledger: Ledger, grant_id: str, used_messages: int | None, used_bytes: int | None,
            now: float, confirmed: bool = False) -> tuple[Ledger, bool]:
    """End a grant: what was used stays in flight (sent by `now`; `confirmed`: and
    confirmed), the rest returns at once. Unknown uses (None) are taken as all of it. False
    when the grant is not held (released already, or expired, which took it as fully
    used). ValueError per `release_problem`."""
    held = ledger.grants.get(grant_id)
    if held is None:
        return ledger, False
    problem = release_problem(ledger, grant_id, used_messages, used_bytes)
    if problem is not None:
        raise ValueError(problem[1])
    grants = {k: g for k, g in ledger.grants.items() if k != grant_id}
    return _spend(replace(ledger, grants=grants), held,
                  spent(held, used_messages, used_bytes, now, confirmed)), True


def spent(held: Grant, used_messages: int | None, used_bytes: int | None,
          now: float, confirmed: bool = False) -> InFlight:
    """What ending `held` at `now` leaves in flight: the uses said (None: all of it), sent
    by `now` or by the end of its lease, whichever came first. Confirmed only when
    released in time: after its lease it was taken as spent, unconfirmed, already."""
    return InFlight(held.messages if used_messages is None else used_messages,
                    (held.bytes or 0) if used_bytes is None else used_bytes,
                    min(now, held.expires_at), confirmed and now <= held.expires_at)


def expire(ledger: Ledger, now: float) -> Ledger:
    """End the grants whose lease is over, each taken as fully used when it ended."""
    ended = [g for g in ledger.grants.values() if g.expires_at <= now]
    if not ended:
        return ledger
    ledger = replace(ledger, grants={k: g for k, g in ledger.grants.items()
                                     if g.expires_at > now})
    for held in ended:
        ledger = _spend(ledger, held, InFlight(held.messages, held.bytes or 0,
                                               held.expires_at))
    return ledger


def _spend(ledger: Ledger, held: Grant, used: InFlight) -> Ledger:
    if used.messages == 0 and used.bytes == 0:
        return ledger
    flying = dict(ledger.in_flight)
    for key in held.queues:
        flying[key] = (*flying.get(key, ()), used)
    return replace(ledger, in_flight=flying)


def settle(ledger: Ledger, as_of: Mapping[QueueKey, float | None], now: float,
           ask_window: float) -> Ledger:
    """Forget what depth now shows or what no longer matters: in-flight credit sent by the
    moment each queue's last sample describes, in-flight credit of queues that are gone
    (not in `as_of`), and asks older than `ask_window`."""
    flying: dict[QueueKey, tuple[InFlight, ...]] = {}
    for key, entries in ledger.in_flight.items():
        if key not in as_of:
            continue
        seen = as_of[key]
        kept = entries if seen is None else tuple(f for f in entries if f.sent_by > seen)
        if kept:
            flying[key] = kept
    asked: dict[QueueKey, Mapping[str, float]] = {}
    for key, by_producer in ledger.asked.items():
        recent = {p: at for p, at in by_producer.items() if now - at <= ask_window}
        if recent:
            asked[key] = recent
    return replace(ledger, in_flight=flying, asked=asked)
