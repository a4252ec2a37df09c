"""The shared state of flow-sidecar replicas, as RabbitMQ global parameters: names, values,
and the rule that keeps `flowStoppedCount` (and warning episode numbers) one number across
replicas. Pure: no I/O.

One parameter per fact, so that two replicas writing different facts never overwrite each
other (the management API has no compare-and-set; a write replaces one whole value):

    flow-sidecar.settings.<digest>   {"vhost", "queue", "settings": {qpid.flow_*: int,
                                      flow.warning_*: number},
                                      "producerClasses": {name: fraction} when set}
    flow-sidecar.counter.<digest>    {"vhost", "queue", "count", "stopped", "at"}
    flow-sidecar.warning.<digest>    {"vhost", "queue", "count", "warned", "at"}: warning
                                      episodes, numbered like flowStoppedCount
    flow-sidecar.defaults            {"stop_percent", "resume_percent", "queue_limit"}
    flow-sidecar.webhook.<id>        a webhook subscription, secret included
    flow-sidecar.replica.<id>        a replica's heartbeat: {"url", "at", "seen": {id: at}}
    flow-sidecar.credit.<id>         until when a replica's grants may be spent, per vhost
    flow-sidecar.reports.<id>        the producer reports a replica heard, on its paced
                                     queues (sidecar.cluster.shared_reports)

`<digest>` is 32 hex digits of SHA-256 over the queue's vhost and name: the broker makes
every parameter name an atom (at most 255 characters, never freed), which a long or odd
queue name must not break. The value carries the names, so `rabbitmqctl
list_global_parameters` stays readable. Values another program wrote in a shape we do not
know are skipped and reported, never trusted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sidecar.cluster.shared_reports import Record, parse_record
from sidecar.flow.fill_rate import WARNING_KEYS, warning_problems
from sidecar.flow.producer_classes import PRODUCER_CLASSES, class_problems
from sidecar.flow.thresholds import FLOW_KEYS, DefaultPolicy
from sidecar.model import QueueKey
from sidecar.signals.webhook_outbox import Subscription

PREFIX = "flow-sidecar."
SETTINGS = PREFIX + "settings."
COUNTER = PREFIX + "counter."
WARNING = PREFIX + "warning."  # warning episodes: the same record as COUNTER's
WEBHOOK = PREFIX + "webhook."
DEFAULTS = PREFIX + "defaults"
REPLICA = PREFIX + "replica."  # heartbeats: who grants credit (sidecar.cluster.grant_owners)
CREDIT = PREFIX + "credit."  # each replica's credit record (sidecar.cluster.credit_record)
REPORTS = PREFIX + "reports."  # producer reports each replica heard (shared_reports)


@dataclass(frozen=True)
class SharedCounter:
    """A queue's flowStoppedCount (or its count of warning episodes) as the replicas last
    recorded it: the count, whether the recording replica saw the queue stopped (warned),
    and when (its wall clock)."""

    count: int
    stopped: bool
    at: float


@dataclass(frozen=True)
class Replica:
    """A replica's heartbeat: where its API is reached, when it last said it is live, and
    the replicas it counted as live (by id, with the heartbeat `at` it had seen of each)
    when it wrote it; `seen` is None from a sidecar too old to say."""

    url: str
    at: float
    seen: Mapping[str, float] | None = None


@dataclass(frozen=True)
class Credit:
    """A replica's credit record: per vhost, the moment by which every grant it answered
    there is spent; written by the process `incarnation` (a new one at every start)."""

    incarnation: str
    until: Mapping[str, float]


@dataclass
class SharedView:
    """Everything the replicas share, read in one request."""

    settings: dict[QueueKey, dict[str, float]] = field(default_factory=dict)
    classes: dict[QueueKey, dict[str, float]] = field(default_factory=dict)  # of `settings`
    counters: dict[QueueKey, SharedCounter] = field(default_factory=dict)
    warnings: dict[QueueKey, SharedCounter] = field(default_factory=dict)  # episodes
    defaults: DefaultPolicy | None = None  # None: each replica's start-up options
    webhooks: dict[str, Subscription] = field(default_factory=dict)
    replicas: dict[str, Replica] = field(default_factory=dict)  # by id
    credit: dict[str, Credit] = field(default_factory=dict)  # by replica id
    reports: dict[str, Record] = field(default_factory=dict)  # by replica id
    problems: list[str] = field(default_factory=list)  # parameters skipped, and why


def digest(key: QueueKey) -> str:
    """A fixed-length name part for a queue, whatever its vhost and name hold."""
    text = json.dumps(list(key), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def settings_parameter(key: QueueKey, values: Mapping[str, float],
                       classes: Mapping[str, float] | None = None) -> tuple[str, Any]:
    """(name, value) of a queue's stored settings, with its own producerClasses if any."""
    value: dict[str, Any] = {"vhost": key[0], "queue": key[1], "settings": dict(values)}
    if classes is not None:
        value[PRODUCER_CLASSES] = dict(classes)
    return SETTINGS + digest(key), value


def counter_parameter(key: QueueKey, counter: SharedCounter,
                      warning: bool = False) -> tuple[str, Any]:
    """(name, value) of a queue's shared flowStoppedCount, or with `warning` its shared
    count of warning episodes."""
    flag = "warned" if warning else "stopped"
    return (WARNING if warning else COUNTER) + digest(key), {
        "vhost": key[0], "queue": key[1], "count": counter.count, flag: counter.stopped,
        "at": counter.at}


def credit_parameter(replica: str, credit: Credit) -> tuple[str, Any]:
    """(name, value) of a replica's credit record."""
    return CREDIT + replica, {"incarnation": credit.incarnation, "until": dict(credit.until)}


def defaults_value(policy: DefaultPolicy) -> dict[str, int]:
    """The value of `flow-sidecar.defaults`."""
    return asdict(policy)


def webhook_parameter(sub: Subscription) -> tuple[str, Any]:
    """(name, value) of a webhook subscription, secret included (signing needs it)."""
    return WEBHOOK + sub.id, asdict(sub)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _times(value: Any) -> dict[str, float] | None:
    """A JSON object of names to moments ({} from the broker's [] for an empty object)."""
    if value == []:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        return None
    return {str(k): float(v) for k, v in value.items()}


def _queue_key(value: Any) -> QueueKey | None:
    if isinstance(value, dict) and isinstance(value.get("vhost"), str) and isinstance(
            value.get("queue"), str):
        return (value["vhost"], value["queue"])
    return None


def parse(parameters: Mapping[str, Any]) -> SharedView:
    """The shared state in `parameters` ({name: value}, as the broker lists them)."""
    view = SharedView()
    for name, value in parameters.items():
        if not _take(view, name, value):
            view.problems.append(f"global parameter {name!r} ignored: not a value "
                                 "flow-sidecar wrote")
    return view


def _take(view: SharedView, name: str, value: Any) -> bool:
    """Add one parameter to `view`; False when its value has an unknown shape."""
    key = _queue_key(value)
    if name.startswith(SETTINGS):
        settings = value.get("settings") if key else None
        if settings == []:  # the broker lists an empty JSON object as []
            settings = {}
        classes = value.get(PRODUCER_CLASSES) if key else None
        if classes == []:
            classes = {}
        if key is None or not isinstance(settings, dict) or not all(
                (k in FLOW_KEYS and _int(v)) or k in WARNING_KEYS
                for k, v in settings.items()) or warning_problems(settings) or (
                classes is not None and class_problems(classes)):
            return False
        view.settings[key] = settings
        if classes is not None:
            view.classes[key] = classes
        return True
    if name.startswith((COUNTER, WARNING)):
        counters, flag = ((view.counters, "stopped") if name.startswith(COUNTER)
                          else (view.warnings, "warned"))
        if key is None or not _int(value.get("count")) or not isinstance(
                value.get(flag), bool) or not isinstance(value.get("at"), (int, float)):
            return False
        counters[key] = SharedCounter(value["count"], value[flag], value["at"])
        return True
    if name == DEFAULTS:
        try:
            policy = DefaultPolicy(**value)
        except TypeError:
            return False
        if not all(_int(v) for v in asdict(policy).values()) or policy.problems():
            return False
        view.defaults = policy
        return True
    if name.startswith(REPLICA):
        if not isinstance(value, dict) or not isinstance(value.get("url"), str) or not (
                isinstance(value.get("at"), (int, float))):
            return False
        seen = None if "seen" not in value else _times(value["seen"])
        if "seen" in value and seen is None:
            return False
        view.replicas[name.removeprefix(REPLICA)] = Replica(value["url"], value["at"], seen)
        return True
    if name.startswith(CREDIT):
        until = _times(value.get("until")) if isinstance(value, dict) else None
        if until is None or not isinstance(value.get("incarnation"), str):
            return False
        view.credit[name.removeprefix(CREDIT)] = Credit(value["incarnation"], until)
        return True
    if name.startswith(REPORTS):
        record = parse_record(value)
        if record is not None:
            view.reports[name.removeprefix(REPORTS)] = record
        return record is not None
    if name.startswith(WEBHOOK):
        try:
            sub = Subscription(**value)
        except TypeError:
            return False
        if sub.id != name.removeprefix(WEBHOOK) or not all(isinstance(v, str) for v in (
                sub.url, sub.secret, sub.vhost, sub.queue)):
            return False
        view.webhooks[sub.id] = sub
        return True
    return False


def counter_floor(shared: SharedCounter, local_stopped: bool, now: float,
                  join_window: float) -> int:
    """The least flowStoppedCount a replica may show for a queue, given the shared record.

    Every replica runs the same state machine on the same broker figures, and counts an
    OFF->ON transition as the others do. Replicas see a transition up to a poll apart, so a
    replica that is OFF (or has not sampled the queue yet, which starts it OFF) while the
    record says another one saw the queue stop, or saw an episode end less than
    `join_window` seconds ago, may not have seen that episode start yet: it stays one below
    the record and its own OFF->ON counts that same episode, instead of adding one.
    Otherwise it takes the record's count.
    """
    lagging = not local_stopped and (shared.stopped or now - shared.at <= join_window)
    return shared.count - 1 if lagging else shared.count


def episode_floor(shared: SharedCounter | None, now: float, join_window: float) -> int:
    """The number a warning episode starting now on a replica comes after, given the shared
    record of the queue's warning episodes: `counter_floor` of a replica not yet warned (it
    joins an episode another replica started, or ended within `join_window`, rather than
    opening the next one)."""
    return 0 if shared is None else counter_floor(shared, False, now, join_window)
