"""Producer reports shared between replicas (`--shared-state broker`): each replica's record
of the reports it heard, bounded, and the union every replica paces and ranks on. Pure.

`flow-sidecar.reports.<replica id>` = {"at": when written, "queues": [{"vhost", "queue",
"producers": {id: {"class": name or null, "reports": [[deciseconds from at, count less
the report before's], ...]}}}]}: per queue, per producer, its dated cumulative counts
(`X-Producer-Published`, the first one whole, then each as a rise over the one before),
the newest and the oldest kept and the rest thinned to `SPACING` apart over the last
`HORIZON` seconds (the minute "who filled it" looks back, the 10 s pacing's reported rate
needs). Bounds: at most `QUEUES` queues and `PRODUCERS` producers per queue (the most
messages over the horizon first), so a record holds at most QUEUES x PRODUCERS x
(HORIZON / SPACING + 2) reports: 32 x 16 x 24, about 220 KB of JSON at worst (40-character
names, each producer at 10,000 messages/s); a few KB for a few paced queues.
The union takes, per queue and producer, the series whose newest report is the newest
(heard by two replicas, a producer counts once). See docs/replicas.md and
docs/graded-flow.md#pacing.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise
from typing import Any

from sidecar.model import QueueKey
from sidecar.signals.producer_reports import Heard, Report

SPACING = 3.0  # seconds between two reports kept in a record (its newest always kept)
HORIZON = 66.0  # seconds of reports a record keeps: a minute, and a poll or two more
QUEUES = 32  # queues per record at most
PRODUCERS = 16  # producers per queue at most
QueueReports = dict[str, Heard]  # producer: (class, reports oldest first)
Record = dict[QueueKey, QueueReports]


def thinned(reports: Sequence[Report], now: float) -> tuple[Report, ...]:
    """`reports` (oldest first) within `HORIZON` of `now`: the newest, then one every
    `SPACING` seconds going back, and the oldest (so the span they cover is kept whole)."""
    kept: list[Report] = []
    oldest: Report | None = None
    for report in reversed(reports):
        if report[0] < now - HORIZON:
            break
        oldest = report
        if not kept or kept[-1][0] - report[0] >= SPACING:
            kept.append(report)
    if oldest is not None and kept[-1] != oldest:
        kept.append(oldest)
    return tuple(reversed(kept))


def _messages(reports: Sequence[Report]) -> int:
    return reports[-1][1] - reports[0][1] if reports else 0


def bounded(heard: Mapping[QueueKey, Mapping[str, Heard]], now: float) -> Record:
    """What a record holds of `heard`: thinned, at most `PRODUCERS` producers per queue and
    `QUEUES` queues (the most messages first), producers with no report left dropped."""
    queues: list[tuple[int, QueueKey, QueueReports]] = []
    for key, producers in heard.items():
        kept = {p: (cls, thinned(reports, now)) for p, (cls, reports) in producers.items()}
        ranked = sorted((p for p, (_, r) in kept.items() if r),
                        key=lambda p: -_messages(kept[p][1]))[:PRODUCERS]
        if ranked:
            queues.append((sum(_messages(kept[p][1]) for p in ranked), key,
                           {p: kept[p] for p in ranked}))
    queues.sort(key=lambda q: -q[0])
    return {key: producers for _, key, producers in queues[:QUEUES]}


def record_value(record: Record, now: float) -> dict[str, Any]:
    """The global parameter's value of `record`, written at `now`."""
    return {"at": now, "queues": [
        {"vhost": key[0], "queue": key[1], "producers": {
            p: {"class": cls, "reports": [[round((t - now) * 10), n - before] for (t, n), before
                                          in zip(reports, (0, *(n for _, n in reports)),
                                                 strict=False)]}
            for p, (cls, reports) in producers.items()}}
        for key, producers in record.items()]}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def _series(value: Any, at: float) -> tuple[Report, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    reports: list[Report] = []
    count = 0
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and _number(item[0])
                and isinstance(item[1], int) and not isinstance(item[1], bool)
                and item[1] >= 0):
            return None
        count += item[1]
        reports.append((at + item[0] / 10, count))
    if any(b[0] <= a[0] for a, b in pairwise(reports)):
        return None
    return tuple(reports)


def parse_record(value: Any) -> Record | None:
    """The record in a global parameter's value; None when it has an unknown shape."""
    if not isinstance(value, dict) or not _number(value.get("at")):
        return None
    at, queues = float(value["at"]), value.get("queues")
    if not isinstance(queues, list) or len(queues) > QUEUES:
        return None
    record: Record = {}
    for item in queues:
        producers = item.get("producers") if isinstance(item, dict) else None
        if producers == []:  # the broker lists an empty JSON object as []
            producers = {}
        if not isinstance(producers, dict) or len(producers) > PRODUCERS or not (
                isinstance(item.get("vhost"), str) and isinstance(item.get("queue"), str)):
            return None
        found: QueueReports = {}
        for producer, heard in producers.items():
            cls = heard.get("class") if isinstance(heard, dict) else 0
            reports = _series(heard.get("reports"), at) if isinstance(heard, dict) else None
            if reports is None or not (cls is None or isinstance(cls, str)):
                return None
            found[str(producer)] = (cls, reports)
        record[(item["vhost"], item["queue"])] = found
    return record


def union(records: Mapping[str, Record], live: Collection[str]) -> Record:
    """The reports of the records of live replicas (by id), per queue and producer the
    series with the newest report; records of replicas not in `live` are ignored."""
    merged: Record = {}
    for replica, record in records.items():
        if replica not in live:
            continue
        for key, producers in record.items():
            into = merged.setdefault(key, {})
            for producer, heard in producers.items():
                known = into.get(producer)
                if known is None or heard[1][-1][0] > known[1][-1][0]:
                    into[producer] = heard
    return merged
