"""The event loop's time for one flow change, with N SSE streams open on another queue.

    .venv/bin/python bench/change_fanout.py [--streams 10000] [--changes 200]

In process: a real `ChangeHub` with `--streams` streams subscribed as `GET /events`
subscribes them, and `--changes` transitions of queues none of them wants, each handed to
`ChangeHub.on_change` as the engine hands it (on the event loop, all at once). The hubs:

- no stream at all: the baseline;
- every stream on one named queue (`/events?queue=orders`), or on one glob
  (`/events?name=orders*`): one filter, asked once a change (named: not at all for
  another queue's change);
- each stream on a queue of its own (`/events?queue=orders-N`): the hub keeps them by
  name and asks none of them about another queue's change;
- each stream on a glob of its own (`/events?name=orders-N*`): every filter is asked
  every change, as every stream was asked before the hub kept streams by filter.

Then a stream's snapshot at connect, with `--queues` queues in a real engine (one poll of
a scripted broker): the queues a named filter wants, looked up by name
(`QueueFilter.wanted`), against a walk of every queue (what a glob needs, and what every
stream's snapshot did before).

Prints the times and the ratios to the baselines; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from api.main import build
from api.routes.events import QueueFilter
from sidecar.config import Settings
from sidecar.model import Change
from sidecar.signals.change_fanout import ChangeHub
from tests.api.conftest import ScriptedBroker


async def per_change(filters: list[QueueFilter], changes: int) -> float:
    """Seconds of one `on_change` of a queue no stream wants, the fastest of 5 passes,
    with one stream subscribed per filter."""
    hub = ChangeHub()
    for queues in filters:
        hub.subscribe(queues, queues.named_only)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for i in range(changes):
            hub.on_change(Change("/", f"other-{i}", 1, i % 2 == 0))
        best = min(best, (time.perf_counter() - started) / changes)
    return best


async def snapshot_times(queues: int, repeat: int) -> tuple[float, float]:
    """Seconds to find a stream's queues in an engine of `queues`: by name, by a walk."""
    broker = ScriptedBroker()
    for i in range(queues):
        broker.queue(f"orders-{i}", 0, 0)
    with tempfile.TemporaryDirectory() as data:
        sidecar = build(Settings(data_dir=Path(data)), broker, None)
        await sidecar.runtime.poller.poll_once()
        engine = sidecar.runtime.engine
        named = QueueFilter(None, frozenset({"orders-42"}), None)

        def timed(find: Callable[[], object]) -> float:
            started = time.perf_counter()
            for _ in range(repeat):
                find()
            return (time.perf_counter() - started) / repeat

        walk = timed(lambda: sorted((e for e in engine.entries() if named(e.key)),
                                    key=lambda e: e.key))
        lookup = timed(lambda: named.wanted(engine))
        sidecar.runtime.recorder.close()
        sidecar.store.close()
    return lookup, walk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--queues", type=int, default=10_000)
    args = parser.parse_args()
    n = args.streams
    base = min(asyncio.run(per_change([], args.changes)) for _ in range(2))
    print(f"one change of another queue, {n} streams open, fastest of 5 passes of "
          f"{args.changes}:")
    print(f"  no stream (baseline): {base * 1e6:.1f} µs")
    for label, filters in (
            ("on one named queue", [QueueFilter(None, frozenset({"orders"}), None)] * n),
            ("on one glob", [QueueFilter(None, frozenset(), "orders*")] * n),
            ("each on a queue of its own",
             [QueueFilter(None, frozenset({f"orders-{i}"}), None) for i in range(n)]),
            ("each on a glob of its own",
             [QueueFilter(None, frozenset(), f"orders-{i}*") for i in range(n)])):
        took = asyncio.run(per_change(filters, args.changes))
        print(f"  {n} streams {label}: {took * 1e6:.1f} µs ({took / base:.1f}x baseline)")
    lookup, walk = asyncio.run(snapshot_times(args.queues, 50))
    print(f"a stream's snapshot at connect, {args.queues} queues, /events?queue=orders-42:")
    print(f"  a walk of every queue (baseline): {walk * 1e6:.0f} µs")
    print(f"  looked up by name: {lookup * 1e6:.1f} µs ({lookup / walk:.4f}x baseline)")

if __name__ == "__main__":
    main()
