"""The JSON answers of `GET /flow/...` and `GET /queues/...`, built from the engine's read side.

`Answers.flow_body` keeps the encoded answer in an `AnswerCache` until the engine or the
producer registry changes what it shows (a new sample, a transition, a threshold change,
staleness, a new producer), so the hot path is a dict lookup and a bytes write. Field
names are the ones producers read today; `api.schemas` documents them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from api.http_cache import AnswerCache
from api.queue_selection import Row
from sidecar.flow.engine import FlowEngine
from sidecar.flow.fill_rate import WARNING_KEYS
from sidecar.flow.forecast import shown
from sidecar.flow.producer_classes import (
    PRODUCER_CLASSES,
    class_thresholds,
    producer_flow,
    stopped_by_name,
)
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.stop_reasons import StopReason
from sidecar.flow.thresholds import FLOW_KEYS
from sidecar.model import QueueKey
from sidecar.signals.capacity_window import capacity_check
from sidecar.signals.event_json import iso, thresholds_json
from sidecar.signals.pacing_offers import PacingOffers
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.producers import ProducerRegistry


def producers_json(producers: ProducerRegistry, entry: QueueEntry) -> dict[str, Any]:
    """Active producers and the seed's capacity-window check (`overflowRisk`), in messages
    and in bytes (`overflowRiskUnjudged` when the bytes cannot be judged)."""
    window = producers.window(entry.key)
    rate = entry.info.publish_rate
    check = capacity_check(entry.resolution.thresholds, entry.limits.max_length,
                           entry.limits.max_length_bytes, window,
                           producers.during_reaction(rate), entry.depth)
    return {
        "producers": {"active": len(producers.active(entry.key)), "capacity": window.messages,
                      "capacityBytes": window.bytes, "publishRate": rate},
        "overflowRisk": bool(check.risks),
        "overflowRiskDetail": "; ".join(r.describe() for r in check.risks) or None,
        "overflowRiskUnjudged": check.unjudged,
    }


def producer_list(producers: ProducerRegistry, key: QueueKey) -> list[dict[str, Any]]:
    """Each active producer of a queue: its capacity, when it last asked, what it was told.
    Not part of `/flow` answers, which are cached while last-seen times move on."""
    return [{"id": producer_id, "capacity": p.capacity, "capacityBytes": p.capacity_bytes,
             "lastSeenAt": iso(p.last_seen), "toldStopped": p.told_stopped}
            for producer_id, p in sorted(producers.active(key).items())]


def stopped_by(reasons: tuple[StopReason, ...]) -> list[str]:
    """`flowStoppedBy`: the name of each cause ("queue", "stale", "vhost-quota",
    "broker-alarm"); empty: producers may send."""
    return [str(r.by) for r in reasons]


def stop_reasons_json(reasons: tuple[StopReason, ...]) -> dict[str, Any]:
    """Why producers are told to stop: `flowStoppedBy` (see `stopped_by`) and
    `flowStopReasons`, each cause in words."""
    return {"flowStoppedBy": stopped_by(reasons),
            "flowStopReasons": [{"by": str(r.by), "detail": r.detail} for r in reasons]}


def queue_view(engine: FlowEngine, entry: QueueEntry,
               producers: ProducerRegistry) -> dict[str, Any]:
    """Everything a producer or operator needs about one queue the broker reports."""
    res = entry.resolution
    return {
        "vhost": entry.vhost,
        "queue": entry.name,
        "exists": True,
        "flowStopped": entry.told_stopped,
        "flowStoppedCount": entry.state.stopped_count,
        "measuredFlowStopped": entry.state.stopped,
        **stop_reasons_json(entry.stop_reasons),
        # who runs the machine: the sidecar over polled depths, or the broker itself (Qpid)
        "flowSource": "sidecar" if entry.info.broker_flow is None else "broker",
        "brokerFlowStoppedCount": None if entry.info.broker_flow is None
        else entry.info.broker_flow.stopped_count,
        "depth": None if entry.depth is None else {
            "messages": entry.depth.messages, "bytes": entry.depth.bytes},
        "depthSource": str(entry.origin.source),
        "bytesEstimated": entry.origin.bytes_estimated,
        "thresholds": thresholds_json(res),
        "sources": {"count": str(res.count_source), "size": str(res.size_source)},
        "limits": entry.limits.as_json(),
        "configErrors": list(res.errors),
        "configWarnings": list(res.warnings),
        "sampledAt": iso(entry.sampled_at),
        "stale": entry.stale,
        "onStale": engine.on_stale,
        "lastTransitionAt": iso(entry.last_transition_at),
        **producers_json(producers, entry),
        **forecast_json(entry),
        "version": entry.version,
    }


def settings_json(engine: FlowEngine, key: QueueKey) -> dict[str, Any]:
    """The stored API settings of a queue (`stored_json`), and its own producerClasses
    when it has some (absent: its vhost's default applies)."""
    settings: dict[str, Any] = stored_json(engine.stored_settings(key) or {})
    if (classes := engine.stored_classes(key)) is not None:
        settings[PRODUCER_CLASSES] = classes
    return settings


def classes_json(entry: QueueEntry) -> dict[str, Any]:
    """`classes` in `/queues`: each producer class's fraction, state and thresholds."""
    res, states = entry.resolution, entry.class_states
    return {name: {"fraction": float(fraction),
                   "flowStopped": name in states and states[name].stopped,
                   "thresholds": thresholds_json(replace(
                       res, thresholds=class_thresholds(res.thresholds, fraction)))}
            for name, fraction in sorted(entry.producer_classes.items())}


def class_view(view: dict[str, Any], entry: QueueEntry, name: str) -> dict[str, Any]:
    """The queue's answer for a producer of class `name`, which is stopped: its class
    named after the queue's own reasons (`producer_classes.producer_flow`)."""
    told = producer_flow(name, tuple(view["flowStoppedBy"]), entry.class_states)
    view["flowStopReasons"] = [*view["flowStopReasons"], {
        "by": stopped_by_name(name),
        "detail": f"the queue's depth passed the stop of producer class {name} "
                  f"({float(entry.producer_classes[name])} of the queue's thresholds); it "
                  "sends again under the class's resume"}]
    view["flowStopped"], view["flowStoppedBy"] = told.stopped, list(told.stopped_by)
    return view


def forecast_json(entry: QueueEntry) -> dict[str, Any]:
    """The queue's forecast (docs/graded-flow.md), rounded as `forecast.shown` rounds it,
    so an answer changes with what it shows, not with the fit's last digits."""
    fill_rate, fill_rate_bytes, to_stop, warned = shown(entry)
    return {"fillRate": fill_rate, "fillRateBytes": fill_rate_bytes, "secondsToStop": to_stop,
            "warning": warned}


def stored_json(stored: Mapping[str, float]) -> dict[str, float | None]:
    """Stored settings as answers show them: all four qpid.flow_* keys (null = not set),
    and the warning settings that are set."""
    return {**{k: stored.get(k) for k in FLOW_KEYS},
            **{k: stored[k] for k in WARNING_KEYS if k in stored}}


def _encode(value: Any) -> bytes:
    """Compact UTF-8 JSON, as every answer of these routes is written."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class Answers:
    """Builds the answers of the flow and queue routes from the engine and the producer
    registry, with the encoded `/flow` bodies cached."""

    def __init__(self, engine: FlowEngine, producers: ProducerRegistry,
                 cache: AnswerCache | None = None,
                 reports: ProducerReports | None = None) -> None:
        self.engine = engine
        self.producers = producers
        self.cache = cache or AnswerCache()
        self.reports = ProducerReports() if reports is None else reports
        self.offers = PacingOffers(producers, self.reports)

    def flow_body(self, entry: QueueEntry, producer_class: str | None = None) -> bytes:
        """The encoded `GET /flow` answer, cached until what it shows changes; for a
        producer whose class is stopped (`X-Producer-Class`) its class's, cached apart. No
        class, an unknown one or a flowing one: the queue's own, byte for byte."""
        if producer_class is not None and self.class_stopped(entry, producer_class):
            return self._cached(entry, (*entry.key, producer_class), lambda: class_view(
                queue_view(self.engine, entry, self.producers), entry, producer_class))
        return self._cached(entry, entry.key,
                            lambda: queue_view(self.engine, entry, self.producers))

    @staticmethod
    def class_stopped(entry: QueueEntry, producer_class: str) -> bool:
        """Whether the queue's producer class `producer_class` is stopped."""
        state = entry.class_states.get(producer_class) if entry.classes_held else None
        return state is not None and state.stopped

    def _cached(self, entry: QueueEntry, key: tuple[str, ...],
                view: Callable[[], dict[str, Any]]) -> bytes:
        """The encoded `view()` cached under `key` until the entry or its producers move."""
        stamp = (entry.revision, self.producers.revision(entry.key))
        body = self.cache.get(key, stamp)
        if body is None:
            body = _encode(view())
            self.cache.put(key, stamp, body)
        return body

    def producer_body(self, entry: QueueEntry, producer_id: str | None, now: float,
                      producer_class: str | None = None) -> bytes:
        """The `/flow` answer for one producer: the queue's cached answer (its class's when
        that is stopped), with the producer's `suggestedRate` (messages/s) added while the
        queue is paced, 0 while its class is stopped. Added to the shared bytes, never
        cached with them: no other producer is served it."""
        body = self.flow_body(entry, producer_class)
        rate = None if producer_id is None else self.offers.rate(entry, producer_id, now)
        if rate is None:
            return body
        if producer_class is not None and self.class_stopped(entry, producer_class):
            rate = 0.0
        return b'%s,"suggestedRate":%s}' % (body[:-1], _encode(round(rate, 1)))

    def full_view(self, key: QueueKey) -> dict[str, Any] | None:
        """`/queues` item: the flow view plus stored settings; also for queues that do not
        exist yet but have settings waiting for them. None when neither is known."""
        engine = self.engine
        entry = engine.entry(key)
        if entry is not None:
            view = queue_view(engine, entry, self.producers)
            if entry.producer_classes:
                view["classes"] = classes_json(entry)
        elif engine.stored_settings(key) is not None:
            view = {
                "vhost": key[0], "queue": key[1], "exists": False, "flowStopped": False,
                "flowStoppedCount": engine.stored_count(key), "depth": None,
                "thresholds": None, "sources": None, "sampledAt": None, "stale": True,
            }
        else:
            return None
        view["settings"] = settings_json(engine, key)
        return view

    def full_view_body(self, key: QueueKey) -> bytes | None:
        """`full_view(key)` encoded; for a queue the broker reports, its cached `/flow` body
        with `settings` added, so listing unchanged queues costs no encoding."""
        entry = self.engine.entry(key)
        if entry is None:
            view = self.full_view(key)
            return None if view is None else _encode(view)
        body = self.flow_body(entry)
        classes = b"" if not entry.producer_classes else (
            b',"classes":' + _encode(classes_json(entry)))
        return b"%s%s,\"settings\":%s}" % (body[:-1], classes,
                                          _encode(settings_json(self.engine, key)))

    @staticmethod
    def rows_of(entries: Sequence[QueueEntry]) -> list[Row]:
        """What `/queues` selects by, for queues the broker reports."""
        rows = []
        for entry in entries:
            depth = entry.depth
            rows.append(Row(entry.key, entry.told_stopped,
                            0 if depth is None else depth.messages,
                            0 if depth is None or depth.bytes is None else depth.bytes,
                            entry.state.stopped_count))
        return rows

    def waiting_rows(self) -> list[Row]:
        """The same for queues with settings waiting for them (the broker has none)."""
        engine = self.engine
        return [Row(key, False, 0, 0, engine.stored_count(key))
                for key in engine.settings_keys() if engine.entry(key) is None]

    def record_report(self, key: QueueKey, producer_id: str, published: int | None,
                      now: float, producer_class: str | None = None) -> None:
        """Note a producer's `X-Producer-Published` (memory only: the hot path)."""
        if published is not None:
            self.reports.record(key, producer_id, published, now, producer_class)

    def record_producer(self, entry: QueueEntry, producer_id: str, capacity: int,
                        now: float, *, capacity_bytes: int | None = None,
                        asked_at: float | None = None,
                        producer_class: str | None = None) -> None:
        """Note which producer was told what (a CHN-1005/1006 line when that changes);
        `asked_at`: when a long-poll that answers only now came in."""
        told = entry.told_stopped or (producer_class is not None
                                      and self.class_stopped(entry, producer_class))
        self.producers.seen(entry.key, producer_id, capacity, told, now,
                            capacity_bytes=capacity_bytes, asked_at=asked_at)
