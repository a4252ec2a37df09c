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
recorder's by construction.

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.layout import HOUR
from pipeline.load import FULL_SCHEMA
from pipeline.session import spark_session
from sidecar.flow.queue_limits import effective_limits
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.thresholds import SIZE, DefaultPolicy, Thresholds, maximum, resolve
from sidecar.model import Change
from sidecar.records.history import (
    HistoryFiles,
    Record,
    sample_due,
    sample_record,
    transition_record,
)

POLICY = DefaultPolicy()
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

    def advance(self, rng: random.Random, dt: float) -> None:
        """One time step of producers and consumers; the broker rejects what is over max."""
        if rng.random() < (0.02 if self.bursting else 0.004) * dt:  # ~50 s bursts, ~4 min apart
            self.bursting = not self.bursting
        rate = self.burst_rate if self.bursting else self.base_rate
        if self.state.stopped:
            published, self.in_flight = self.in_flight, 0.0
        else:
            published = rng.uniform(0.5, 1.5) * rate * dt
            self.in_flight = min(float(self.capacity), published)
        drained = rng.uniform(0.7, 1.3) * self.drain_rate * dt
        self.messages = min(float(self.max_messages), max(0.0, self.messages + published - drained))


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


def records(queues: int, seconds: int, *, seed: int = 0, poll: float = 1.0,
            interval: float = 5.0, start: float = START) -> Iterator[Record]:
    """Records in time order, as the recorder would write them for these queues."""
    rng = random.Random(seed)
    sims = [make_queue(rng, i) for i in range(queues)]
    shown: dict[str, tuple[object, ...]] = {}
    sampled_at: dict[str, float] = {}
    for tick in range(int(seconds / poll)):
        now = start + tick * poll
        for sim in sims:
            sim.advance(rng, poll)
            depth = Depth(int(sim.messages), int(sim.messages) * sim.message_size)
            state, events = step(sim.state, depth, sim.thresholds)
            sim.state = state
            for event in events:
                sim.version += 1
                yield transition_record(Change("/", sim.name, sim.version, state.stopped, event,
                                               "synthetic", state.stopped_count), now)
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
             start: float = START) -> int:
    """Write the records of `records()` under `directory`; how many were written."""
    files = HistoryFiles(directory)
    try:
        return files.append(records(queues, seconds, seed=seed, start=start))
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
        count = generate(args.out, args.queues, args.seconds, seed=args.seed)
    print(f"wrote {count} records for {args.queues} queues x {args.seconds} s to {args.out}")


if __name__ == "__main__":
    main()
