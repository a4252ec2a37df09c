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
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.flow.queue_limits import effective_limits
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.thresholds import SIZE, DefaultPolicy, Thresholds, maximum, resolve
from sidecar.model import Change
from sidecar.records.history import (
    HistoryFiles,
    Record,
    Seen,
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
    last: dict[str, Seen] = {}
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
            if not sample_due(last.get(sim.name), shows, now, interval):
                continue
            last[sim.name] = (shows, now)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.synthetic",
                                     description="Write synthetic flow history.")
    parser.add_argument("--out", type=Path, required=True, help="history directory to write")
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=3600, help="simulated time, 1 s polls")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    count = generate(args.out, args.queues, args.seconds, seed=args.seed)
    print(f"wrote {count} records for {args.queues} queues x {args.seconds} s to {args.out}")


if __name__ == "__main__":
    main()
