"""Producer reports shared between replicas: a record's bounds and shape, the union of the
live replicas' records (newest report wins), and what the reports answer on that union."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise

from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.reports_record import ReportsRecord
from sidecar.cluster.shared_reports import (
    HORIZON,
    PRODUCERS,
    QUEUES,
    SPACING,
    bounded,
    parse_record,
    record_value,
    thinned,
    union,
)
from sidecar.cluster.shared_view import REPORTS, parse
from sidecar.signals.producer_reports import ProducerReports
from tests.unit.test_credit_record import Params
from tests.unit.test_grant_owners import beats, replica

Q = ("/", "orders")
NOW = 1_000_000.0


def series(start: float, end: float, rate: float, step: float = 1.0) -> list[tuple[float, int]]:
    """Reports every `step` seconds from `start` to `end` of a producer sending `rate`/s."""
    count = int((end - start) / step) + 1
    return [(start + i * step, int(i * step * rate)) for i in range(count)]


def test_a_record_keeps_the_newest_and_thins_the_rest_over_the_horizon() -> None:
    reports = series(NOW - 100, NOW, 10)
    kept = thinned(reports, NOW)
    assert kept[-1] == reports[-1] and kept[0][0] >= NOW - HORIZON
    assert all(b[0] - a[0] >= SPACING for a, b in pairwise(kept[1:]))
    assert len(kept) <= HORIZON / SPACING + 2
    assert kept[0] == next(r for r in reports if r[0] >= NOW - HORIZON)  # the span kept whole


def test_a_record_is_bounded_in_queues_and_producers_the_biggest_first() -> None:
    heard = {("/", f"q{i}"): {f"p{j}": (None, series(NOW - 70, NOW, 10_000 + i + j))
                              for j in range(PRODUCERS + 5)} for i in range(QUEUES + 5)}
    record = bounded(heard, NOW)
    assert len(record) == QUEUES and all(len(p) == PRODUCERS for p in record.values())
    assert ("/", f"q{QUEUES + 4}") in record and ("/", "q0") not in record
    assert "p0" not in record[("/", f"q{QUEUES + 4}")]
    value = record_value(record, NOW)
    assert len(json.dumps(value)) < 250_000  # the documented bound (docs/replicas.md)
    assert parse_record(json.loads(json.dumps(value))) == record


def test_old_reports_leave_the_record() -> None:
    heard = {Q: {"gone": (None, series(NOW - 200, NOW - 100, 5)),
                 "here": ("bulk", series(NOW - 5, NOW, 5))}}
    here = ((NOW - 5, 0), (NOW - 3, 10), (NOW, 25))
    assert bounded(heard, NOW) == {Q: {"here": ("bulk", here)}}


def test_values_of_an_unknown_shape_are_skipped_and_reported() -> None:
    good = record_value({Q: {"p": (None, ((NOW - 1, 1), (NOW, 5)))}}, NOW)
    assert parse({REPORTS + "a": good}).reports["a"] == {Q: {"p": (None, ((NOW - 1, 1),
                                                                          (NOW, 5)))}}
    bad = [{"at": NOW}, {"at": NOW, "queues": [{"vhost": "/", "queue": "q",
                                               "producers": {"p": {"reports": [[0, -1.5]]}}}]},
           {"at": NOW, "queues": [{"vhost": "/", "queue": "q",
                                   "producers": {"p": {"reports": [[0, 5], [-10, 9]]}}}]},
           {"at": "x", "queues": []}]
    view = parse({f"{REPORTS}{i}": v for i, v in enumerate(bad)})
    assert view.reports == {} and len(view.problems) == len(bad)


def test_the_union_takes_the_newest_series_and_ignores_gone_replicas() -> None:
    older = {Q: {"p": (None, ((NOW - 4, 10), (NOW - 2, 20)))}}
    newer = {Q: {"p": ("bulk", ((NOW - 3, 12), (NOW - 1, 30))),
                 "q": (None, ((NOW - 3, 0), (NOW - 1, 4)))}}
    gone = {Q: {"p": (None, ((NOW - 2, 0), (NOW, 999)))}, ("/", "x"): {"r": (None, ((NOW, 1),))}}
    merged = union({"a": older, "b": newer, "dead": gone}, {"a", "b"})
    assert merged == newer  # p counted once, as the newer record says; the dead ignored
    assert union({"a": older}, set()) == {}


def test_reports_answer_on_the_union_and_alone_as_before() -> None:
    alone, shared = ProducerReports(), ProducerReports()
    for at, n in series(NOW - 10, NOW, 20):
        alone.record(Q, "mine", n, at)
        shared.record(Q, "mine", n, at)
    before = alone.reported_rate(Q, "mine", NOW, 10), alone.published(Q, NOW - 10, NOW)
    shared.adopt({Q: {"theirs": ("bulk", tuple(series(NOW - 10, NOW, 30, SPACING))),
                      "mine": (None, ((NOW - 20, 0), (NOW - 15, 1_000)))}})  # older: loses
    assert shared.reported_rate(Q, "mine", NOW, 10) == before[0] == 20
    assert shared.reported_rate(Q, "theirs", NOW, 10) == 30
    assert shared.published(Q, NOW - 9, NOW) == before[1] * 0.9 + 270
    assert sorted(shared.producers(Q)) == ["mine", "theirs"]
    ranked = {e.producer: (e.producer_class, e.messages) for e in shared.events(Q, NOW - 60, NOW)}
    assert ranked == {"mine": (None, 200), "theirs": ("bulk", 270)}
    assert alone.reported_rate(Q, "theirs", NOW, 10) is None  # no shared state: unchanged
    shared.adopt({})
    assert shared.producers(Q) == ["mine"]


async def _poll(record: ReportsRecord, now: float) -> None:
    record.on_poll(None, now)
    if record._writing is not None:
        await record._writing


def test_a_replica_answers_what_another_heard_and_a_restart_keeps_it() -> None:
    """Two replicas on one (fake) broker: the producer reports to A only, B offers it the
    same rate; A restarted (same id, new process) has its reports at its first read; a
    replica gone (no heartbeat) is not counted; queues not due stay out of the record."""
    params = Params()
    a, b = replica(1), replica(2)
    heard_a, heard_b = ProducerReports(), ProducerReports()
    def due(key: tuple[str, str], _now: float) -> bool:
        return key == Q  # paced
    record_a = ReportsRecord(params, a, heard_a, due)  # type: ignore[arg-type]  # the fake
    record_b = ReportsRecord(params, b, heard_b, due)  # type: ignore[arg-type]  # the fake
    for at, n in series(NOW - 10, NOW, 20):
        heard_a.record(Q, "p", n, at, "bulk")
        heard_a.record(("/", "calm"), "p", n, at)

    def read(*records: ReportsRecord, at: float, live: tuple[GrantOwnership, ...]) -> None:
        for r in records:
            r.owners.observe(beats(*live, at=at), {}, at)
            r.observe(parse(params.values))

    asyncio.run(_poll(record_a, NOW))
    assert list(params.values) == [REPORTS + a.id]
    read(record_a, record_b, at=NOW + 0.5, live=(a, b))
    window = (NOW - 9, NOW)
    assert heard_b.reported_rate(Q, "p", NOW + 0.5, 10) == heard_a.reported_rate(
        Q, "p", NOW + 0.5, 10) == 20
    assert heard_b.published(Q, *window) == heard_a.published(Q, *window) == 180
    assert [e.producer_class for e in heard_b.events(Q, NOW - 60, NOW)] == ["bulk"]
    assert heard_b.producers(("/", "calm")) == []  # not due: not shared
    asyncio.run(_poll(record_b, NOW + 0.5))  # B heard nothing itself
    assert parse(params.values).reports[b.id] == {}
    writes = record_a.writes
    asyncio.run(_poll(record_a, NOW + 0.6))  # nothing new: no write
    assert record_a.writes == writes

    restarted = ProducerReports()
    record = ReportsRecord(params, replica(1, "i2"), restarted, due)  # type: ignore[arg-type]  # the fake
    read(record, at=NOW + 2, live=(a,))
    assert restarted.reported_rate(Q, "p", NOW + 2, 10) == 20
    asyncio.run(_poll(record, NOW + 2))  # it keeps its former process's reports shared
    assert list(parse(params.values).reports[a.id][Q]) == ["p"]
    read(record_b, at=NOW + 3, live=(b,))  # A's heartbeat is gone: its record is ignored
    assert heard_b.producers(Q) == []
