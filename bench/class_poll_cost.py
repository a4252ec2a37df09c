"""What producer classes cost the engine's poll of 10,000 queues, in process.

    .venv/bin/python bench/class_poll_cost.py [--queues 10000] [--classed 1000] [--polls 30]

The engine alone (`FlowEngine.apply_poll`, SQLite store in a temporary directory), one
poll a second on a fake clock, as `bench/ten_thousand_queues.py` drives it through the
poller, without the broker: a poll where every depth moved, then the same `QueueInfo`
objects again (what the adapters keep for queues whose figures did not change). Baseline
in the same run: the same queues, `--classed` of them with stored thresholds and no
producer classes; then the same with two classes each (`bulk` 0.6 and `standard` 0.85;
docs/graded-flow.md#producer-classes). The fastest of `--polls` polls each (the least
disturbed by other processes). Last, a vhost default (`PUT /vhosts/{vhost}/defaults`)
written over every queue: with its thresholds alone, then with those two classes, the
fastest of `--writes` each. Ratios against the baseline are printed, none is asserted.
Run it from an older tree (`git archive`) for the code before.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.store import Store  # noqa: E402
from sidecar.flow.engine import FlowEngine  # noqa: E402
from sidecar.flow.thresholds import DefaultPolicy  # noqa: E402
from sidecar.flow.vhost_settings import put_queue_defaults  # noqa: E402
from sidecar.model import QueueInfo  # noqa: E402

CLASSES = {"bulk": 0.6, "standard": 0.85}
STOP = {"qpid.flow_stop_count": 1000}


def engine_of(tmp: str, queues: int, now: float) -> FlowEngine:
    """An engine that has polled `queues` queues once."""
    engine = FlowEngine(Store(Path(tmp) / "bench.sqlite3"), DefaultPolicy(), stale_after=1e9)
    engine.apply_poll([QueueInfo("/", f"q{i}", i % 900, (i % 900) * 100)
                       for i in range(queues)], now)
    return engine


def polls(queues: int, classed: int, classes: dict[str, float] | None,
          rounds: int) -> tuple[float, float]:
    """The fastest seconds of a poll with unchanged figures, and of one where every depth
    moved."""
    with tempfile.TemporaryDirectory() as tmp:
        now = 1_000_000.0
        engine = engine_of(tmp, queues, now)
        for i in range(classed):
            engine.put_settings(("/", f"q{i}"), STOP, now, classes)
        same, moved = [], []
        for r in range(rounds):
            now += 1
            shifted = [QueueInfo("/", f"q{i}", (i + r) % 900, ((i + r) % 900) * 100)
                       for i in range(queues)]
            began = time.perf_counter()
            engine.apply_poll(shifted, now)
            moved.append(time.perf_counter() - began)
            now += 1
            began = time.perf_counter()
            engine.apply_poll(shifted, now)  # the very objects again: figures unchanged
            same.append(time.perf_counter() - began)
        return min(same), min(moved)


def vhost_writes(queues: int, classes: dict[str, float] | None, rounds: int) -> float:
    """The fastest seconds of writing a vhost default that every queue takes up."""
    with tempfile.TemporaryDirectory() as tmp:
        now = 1_000_000.0
        engine = engine_of(tmp, queues, now)
        took = []
        for r in range(rounds):
            began = time.perf_counter()
            put_queue_defaults(engine, "/", {"qpid.flow_stop_count": 1000 + r}, now + r,
                               classes)
            took.append(time.perf_counter() - began)
        return min(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--classed", type=int, default=1_000)
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--writes", type=int, default=5)
    args = parser.parse_args()
    base = polls(args.queues, args.classed, None, args.polls)
    with_classes = polls(args.queues, args.classed, CLASSES, args.polls)
    print(f"{args.queues:,} queues, fastest of {args.polls} polls each")
    for label, (b, c) in (("figures unchanged", (base[0], with_classes[0])),
                          ("every depth moved", (base[1], with_classes[1]))):
        print(f"{label}: {args.classed:,} queues with thresholds and no classes "
              f"{b * 1000:.1f} ms; with 2 classes {c * 1000:.1f} ms ({c / b:.2f}x)")
    plain = vhost_writes(args.queues, None, args.writes)
    classed = vhost_writes(args.queues, CLASSES, args.writes)
    print(f"vhost default over {args.queues:,} queues, fastest of {args.writes}: thresholds "
          f"{plain * 1000:.1f} ms; with 2 classes {classed * 1000:.1f} ms "
          f"({classed / plain:.2f}x)")


if __name__ == "__main__":
    main()
