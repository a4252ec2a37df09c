"""Time and size of a `/metrics` scrape with 1,000 queues, against a baseline in the same run.

    .venv/bin/python bench/metrics_scrape.py [--queues 1000] [--repeat 50]

Ours: a real FlowEngine fed one poll of N queues (declare arguments, x-max-length
defaults, some flow stopped), exposed by `FlowCollector` through `generate_latest`, as the
`/metrics` route does (it collects on the event loop and formats in a thread; the
collect part is printed too, as it is what holds up `/flow`). Baseline:
prometheus_client's usual way, plain labelled
`Gauge`s in a CollectorRegistry set by hand to exactly the same samples (same names,
labels and values), so the ratio is the cost of reading the table at scrape time instead
of keeping Gauges up to date. (A fresh registry rather than the process-wide default one,
whose process and GC collectors would add lines that are not ours.) Prints; asserts
nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from api.store import Store
from sidecar.broker import BrokerAdapter
from sidecar.flow.engine import FlowEngine
from sidecar.flow.poller import Poller
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.records.metrics import FlowCollector, metrics_registry


def queues(n: int) -> list[QueueInfo]:
    """A mix: a third with qpid.flow_* arguments, a third with x-max-length, some stopped."""
    infos = []
    for i in range(n):
        arguments: dict[str, object] = {}
        if i % 3 == 0:
            arguments = {"qpid.flow_stop_count": 1000, "qpid.flow_resume_count": 800}
        elif i % 3 == 1:
            arguments = {"x-max-length": 5000, "x-overflow": "reject-publish"}
        messages = 1200 if i % 10 == 0 else i % 700
        infos.append(QueueInfo("/" if i % 4 else "tenant-a", f"orders.eu-west.{i:06d}",
                               messages, messages * 512, arguments=arguments))
    return infos


def per_scrape(render: Callable[[], object], repeat: int) -> float:
    """Median seconds of one render, after a warm-up."""
    render()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        render()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def baseline_registry(ours: CollectorRegistry) -> CollectorRegistry:
    """Plain Gauges, one per sample name, set by hand to every sample `ours` exposes."""
    registry = CollectorRegistry()
    for family in ours.collect():
        gauges: dict[str, Gauge] = {}
        for sample in family.samples:
            names = sorted(sample.labels)
            gauge = gauges.get(sample.name)
            if gauge is None:
                gauge = gauges[sample.name] = Gauge(sample.name, family.documentation,
                                                    names, registry=registry)
            (gauge.labels(**sample.labels) if names else gauge).set(sample.value)
    return registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        engine = FlowEngine(Store(Path(tmp) / "db.sqlite3"), DefaultPolicy(), stale_after=5.0)
        engine.apply_poll(queues(args.queues), now=time.time())
        adapter: BrokerAdapter = None  # type: ignore[assignment]  # never polled here
        poller = Poller(adapter, engine, interval=1.0)
        registry = metrics_registry(FlowCollector(engine, poller))
        ours_body = generate_latest(registry)
        base = baseline_registry(registry)
        base_body = generate_latest(base)

        ours = per_scrape(lambda: generate_latest(registry), args.repeat)
        baseline = per_scrape(lambda: generate_latest(base), args.repeat)
        on_loop = per_scrape(lambda: list(registry.collect()), args.repeat)
        engine.store.close()

    samples = sum(1 for line in ours_body.splitlines() if not line.startswith(b"#"))
    print(f"queues: {args.queues}, samples: {samples}")
    print(f"size: {len(ours_body):,} bytes (baseline {len(base_body):,} bytes, "
          f"{len(ours_body) / len(base_body):.2f}x)")
    print(f"scrape: {ours * 1000:.1f} ms (baseline plain Gauges {baseline * 1000:.1f} ms, "
          f"ratio {ours / baseline:.2f}x)")
    print(f"of which on the event loop (collect; formatting runs in a thread): "
          f"{on_loop * 1000:.1f} ms")


if __name__ == "__main__":
    main()
