"""Synthetic flow history: N queues x T seconds of bursty producers and draining consumers.

The pipeline needs realistic input at any scale (tests, benchmarks, a demo report) without
a broker running for days. Each queue gets a maximum and thresholds resolved by the
sidecar's own `thresholds.resolve` (defaults from max-length, or explicit `qpid.flow_*`
arguments with a narrow gap for some queues, which then flap), producers that switch
between bursts and quiet spells, and consumers that drain at their own pace. The flow
state advances through `flowstate.step`; producers stop publishing while the queue is
stopped, except for the messages already in flight (their capacity) right after a stop,
which is the overshoot the recommendations must absorb. Records are built by the
recorder's own functions and written through its `HistoryFiles`, so the format is the
recorder's by construction. Graded flow too (issue 43): each queue is warned by the
sidecar's own rules (its warning episodes are `warning` records), each stop names the
producers that filled it (a bursting batch job, an application, payments: `topProducers`),
and every other queue gets pacing and classes `enable_at` of the way through (a `settings`
record), after which its producers send what pacing offers while it is warned.

    python -m pipeline.synthetic --out DIR --queues 100 --seconds 36000

At the scale of a day of 10,000 queues (173M samples, ~54 GiB as JSON Lines) a Python
simulation is too slow and the JSON too big, so `--parquet` writes such a day with Spark
straight into the compacted layout (`date=…/hour=HH/`): each queue fills and drains in a
triangle wave of its own period and peak, and its state follows Qpid's hysteresis exactly
(ON above the stop while filling, until below the resume while draining).

    python -m pipeline.synthetic --parquet --out DIR --queues 10000 --seconds 86400
"""

from __future__ import annotations

import argparse
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.layout import HOUR
from pipeline.load import FULL_SCHEMA
from pipeline.session import spark_session
from sidecar.flow.fill_rate import (
    Episodes,
    FillRate,
    WarningPolicy,
    seconds_to_stop,
    track,
    warning,
)
from sidecar.flow.forecast import WarningNote
from sidecar.flow.queue_limits import effective_limits
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.thresholds import SIZE, DefaultPolicy, Thresholds, maximum, resolve
from sidecar.model import Change
from sidecar.records.filled_by import ranking_json
from sidecar.records.history import (
    HistoryFiles,
    Record,
    sample_due,
    sample_record,
    transition_record,
    warning_record,
)
from sidecar.records.settings_history import settings_record
from sidecar.records.top_producers import WINDOW, Kind, ProducerEvent, top_producers

POLICY = DefaultPolicy()
WARNING = WarningPolicy()
START = 1795392000.0  # 2026-11-23T00:00:00Z


@dataclass
class SimQueue:
    """One simulated queue and its producers and consumers."""

    name: str
    thresholds: Thresholds
    max_messages: int
    max_bytes: int | None
    message_size: int
    burst_rate: float
    base_rate: float
    drain_rate: float
    capacity: int
    bursting: bool = False
    messages: float = 0.0
    state: FlowState = field(default_factory=FlowState)
    in_flight: float = 0.0
    version: int = 0
    paced: bool = False  # pacing and classes enabled (a `settings` record said so)
    warned: Episodes = field(default_factory=Episodes)
    fill: float = 0.0  # net messages/s, smoothed: what the sidecar's fit would say
    # per poll: when, what was published, whether the batch job was bursting
    sent: deque[tuple[float, float, bool]] = field(
        default_factory=lambda: deque(maxlen=int(WINDOW)))

    def advance(self, rng: random.Random, dt: float) -> float:
        """One time step of producers and consumers; the broker rejects what is over max.
        Paced producers of a warned queue send what pacing would offer (its rule's total:
        the drain plus the distance to the band's middle over 15 s). What was published."""
        if rng.random() < (0.02 if self.bursting else 0.004) * dt:  # ~50 s bursts, ~4 min apart
            self.bursting = not self.bursting
        rate = self.burst_rate if self.bursting else self.base_rate
        if self.paced and self.warned.active and self.thresholds.count is not None:
            middle = (self.thresholds.count.stop + self.thresholds.count.resume) / 2
            rate = max(0.0, min(rate, self.drain_rate + (middle - self.messages) / 15))
        if self.state.stopped:
            published, self.in_flight = self.in_flight, 0.0
        else:
            published = rng.uniform(0.5, 1.5) * rate * dt
            self.in_flight = min(float(self.capacity), published)
        drained = rng.uniform(0.7, 1.3) * self.drain_rate * dt
        before = self.messages
        self.messages = min(float(self.max_messages), max(0.0, self.messages + published - drained))
        self.fill += ((self.messages - before) / dt - self.fill) * 0.2
        return published


def make_queue(rng: random.Random, index: int) -> SimQueue:
    """A queue with a random maximum; every fifth has tight explicit thresholds."""
    max_messages = rng.choice((500, 1000, 2000, 5000))
    size = rng.randint(200, 2000)
    arguments: dict[str, object] = {"x-max-length": max_messages, "x-overflow": "reject-publish"}
    if index % 5 == 0:
        stop = max_messages // 2
        arguments.update({"qpid.flow_stop_count": stop, "qpid.flow_resume_count": stop - 5})
    limits = effective_limits(arguments, {})
    drain = max_messages * rng.uniform(0.003, 0.02)  # messages/s: minutes to fill the queue
    return SimQueue(
        name=f"synthetic-{index:05d}",
        thresholds=resolve(None, arguments, limits, POLICY).thresholds,
        max_messages=max_messages, max_bytes=maximum(SIZE, limits, POLICY)[0],
        message_size=size, burst_rate=drain * rng.uniform(1.5, 5.0),
        base_rate=drain * rng.uniform(0.3, 0.9), drain_rate=drain,
        capacity=rng.randint(5, max_messages // 20))


def producers(index: int) -> tuple[tuple[str, str], ...]:
    """A queue's producers (id, class): a batch job, an application and payments."""
    return ((f"batch-{index % 7}", "bulk"), (f"app-{index % 3}", "standard"),
            ("payments", "critical"))


def _shares(bursting: bool) -> tuple[float, ...]:
    """How the queue's producers split what is published: the batch job bursts."""
    return (0.7, 0.2, 0.1) if bursting else (0.2, 0.5, 0.3)


def _ranked(sim: SimQueue, index: int, now: float) -> list[Record]:
    """Who filled the queue in the minute before a stop at `now`, as the sidecar ranks it
    (each producer's reports of the minute as one event, as `ProducerReports.events`)."""
    key, sent = ("/", sim.name), [0.0, 0.0, 0.0]
    for _, published, bursting in sim.sent:
        for i, share in enumerate(_shares(bursting)):
            sent[i] += published * share
    since = sim.sent[0][0] - 1.0  # the first poll's messages were sent over the second before
    events = [ProducerEvent(key, producer, cls, Kind.PUBLISHED, round(part), now, since)
              for (producer, cls), part in zip(producers(index), sent, strict=True)]
    return ranking_json(tuple(top_producers(events, key, now)))


def _graded(sim: SimQueue, index: int, depth: Depth, now: float,
            enable_at: float | None) -> Iterator[Record]:
    """A queue's settings change (pacing and classes on, for every other queue at
    `enable_at`) and its warning episodes, by the sidecar's own rules."""
    if enable_at is not None and not sim.paced and index % 2 == 0 and now >= enable_at:
        sim.paced = True
        yield settings_record(("/", sim.name), now, pacing=True,
                              classes={"bulk": Fraction(3, 5), "standard": Fraction(17, 20)})
    to_stop = None if sim.fill <= 0 else seconds_to_stop(
        depth, FillRate(sim.fill, None, now - 20, now), sim.thresholds)
    verdict = warning(depth, to_stop, sim.thresholds, WARNING)
    if not (verdict or sim.warned.active):
        return  # no episode to start or end: `track` would only date the verdict
    sim.warned, warned = track(sim.warned, verdict, now)
    if warned is not None:
        yield warning_record(WarningNote(("/", sim.name), warned, depth, to_stop, sim.fill), now)


def records(queues: int, seconds: int, *, seed: int = 0, poll: float = 1.0,
            interval: float = 5.0, start: float = START,
            enable_at: float | None = 0.5) -> Iterator[Record]:
    """Records in time order, as the recorder would write them for these queues; every
    other queue gets pacing and classes `enable_at` of the way through (None: never)."""
    rng = random.Random(seed)
    sims = [make_queue(rng, i) for i in range(queues)]
    shown: dict[str, tuple[object, ...]] = {}
    sampled_at: dict[str, float] = {}
    enabled = None if enable_at is None else start + enable_at * seconds
    for tick in range(int(seconds / poll)):
        now = start + tick * poll
        for index, sim in enumerate(sims):
            published = sim.advance(rng, poll)
            sim.sent.append((now, published, sim.bursting))
            depth = Depth(int(sim.messages), int(sim.messages) * sim.message_size)
            state, events = step(sim.state, depth, sim.thresholds)
            sim.state = state
            yield from _graded(sim, index, depth, now, enabled)
            for event in events:
                sim.version += 1
                top = _ranked(sim, index, now) if state.stopped else None
                yield transition_record(Change("/", sim.name, sim.version, state.stopped, event,
                                               "synthetic", state.stopped_count), now, top)
            shows = (depth, state)
            if not sample_due(shown.get(sim.name), sampled_at.get(sim.name, 0.0), shows, now,
                              interval):
                continue
            shown[sim.name], sampled_at[sim.name] = shows, now
            yield sample_record(
                ts=now, vhost="/", queue=sim.name, depth=depth, stopped=state.stopped,
                stopped_count=state.stopped_count, thresholds=sim.thresholds,
                max_messages=sim.max_messages, max_bytes=sim.max_bytes,
                producer_capacity=sim.capacity)


def generate(directory: Path, queues: int, seconds: int, *, seed: int = 0,
             start: float = START, enable_at: float | None = 0.5) -> int:
    """Write the records of `records()` under `directory`; how many were written."""
    files = HistoryFiles(directory)
    try:
        return files.append(records(queues, seconds, seed=seed, start=start,
                                    enable_at=enable_at))
    finally:
        files.close()


def day_hour(spark: SparkSession, queues: int, hour: int, interval: float = 5.0,
             start: float = START) -> DataFrame:
    """One hour of samples of `queues` queues, one every `interval` s each, in queue and
    time order, with the columns of the compacted history."""
    per_queue = int(HOUR / interval)
    rows = spark.range(0, queues * per_queue, numPartitions=2)
    q, k = F.floor(F.col("id") / per_queue), F.col("id") % per_queue
    maximum = F.element_at(F.array(*[F.lit(m) for m in (500, 1000, 2000, 5000)]),
                           (q % 4 + 1).cast("int"))
    period = 600 + (q * 7919) % 3000
    t = hour * HOUR + k * interval + (q % 5)
    phase = ((t + q * 31) % period) / period
    peak = F.least(maximum, F.floor(maximum * (0.5 + (q * 104729 % 60) / 100)))
    depth = F.floor(peak * F.when(phase < 0.5, phase * 2).otherwise((1 - phase) * 2))
    stop, resume = F.round(maximum * 0.8).cast("long"), F.floor(maximum * 0.7)
    stopped = F.when(phase < 0.5, depth > stop).otherwise((peak > stop) & (depth >= resume))
    size = 200 + (q * 37) % 1800
    columns = {
        "type": F.lit("sample"), "ts": F.lit(start) + t, "vhost": F.lit("/"),
        "queue": F.format_string("synthetic-%05d", q), "messages": depth,
        "bytes": depth * size, "flowStopped": stopped,
        "flowStoppedCount": F.floor((t + q * 31) / period), "toldStopped": stopped,
        "stale": F.lit(False), "stopCount": stop, "resumeCount": resume,
        "stopSize": F.lit(83886080), "resumeSize": F.lit(73400320), "maxMessages": maximum,
        "maxBytes": F.lit(104857600), "producerCapacity": 5 + q % 50,
        "countSource": F.lit("default"), "sizeSource": F.lit("default")}
    return rows.select(*[F.col(f.name) if f.name not in columns else
                         columns[f.name].cast(f.dataType).alias(f.name)
                         for f in FULL_SCHEMA.fields if f.name in columns])


def write_day(spark: SparkSession, directory: str, queues: int, seconds: int,
              start: float = START) -> int:
    """Write `seconds` of samples (whole hours) as compacted Parquet; how many."""
    hours = max(1, seconds // HOUR)
    for hour in range(hours):
        moment = datetime.fromtimestamp(start + hour * HOUR, UTC)
        (day_hour(spark, queues, hour, start=start).write.option("compression", "zstd")
         .parquet(f"{directory}/date={moment:%Y-%m-%d}/hour={moment:%H}"))
    return hours * queues * int(HOUR / 5.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.synthetic",
                                     description="Write synthetic flow history.")
    parser.add_argument("--out", type=Path, required=True, help="history directory to write")
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=3600, help="simulated time, 1 s polls")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--enable-at", type=float, default=0.5, help="the fraction of the "
                        "run after which every other queue has pacing and classes (a "
                        "`settings` record; default 0.5); negative: never")
    parser.add_argument("--parquet", action="store_true", help="a day at scale, with "
                        "Spark, as compacted Parquet (5 s samples, whole hours)")
    args = parser.parse_args(argv)
    if args.parquet:
        spark = spark_session()
        try:
            count = write_day(spark, str(args.out.absolute()), args.queues, args.seconds)
        finally:
            spark.stop()
    else:
        count = generate(args.out, args.queues, args.seconds, seed=args.seed,
                         enable_at=None if args.enable_at < 0 else args.enable_at)
    print(f"wrote {count} records for {args.queues} queues x {args.seconds} s to {args.out}")


if __name__ == "__main__":
    main()
