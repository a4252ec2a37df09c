"""Time and size of a `/metrics` scrape with N queues, against a baseline in the same run.

    .venv/bin/python bench/metrics_scrape.py [--queues 10000] [--repeat 20]
    .venv/bin/python bench/metrics_scrape.py --over-http [--repeat 20]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

In process (the default): a real FlowEngine fed one poll of N queues (declare arguments,
x-max-length defaults, some flow stopped), scraped as the `/metrics` route does: the
registry's families through `generate_latest`, the per-queue series through
`QueueSeries` (`--metrics-per-queue on`), and the aggregates alone (`off`, or `auto`
above 5,000 queues). Baseline: prometheus_client's usual way, plain labelled `Gauge`s in a
CollectorRegistry set by hand to exactly the same samples, so the ratio is the cost of
writing the table's text directly instead of keeping Gauges up to date.

Over HTTP (`--over-http`): `GET /metrics` of a real sidecar on the target broker (started
twice, `--metrics-per-queue on` and `auto`, unless `--sidecar-url` names one), plain and
gzipped, against the broker's own `GET /api/queues` in the same run. Prints; asserts
nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.store import Store
from sidecar.broker import BrokerAdapter
from sidecar.flow.engine import FlowEngine
from sidecar.flow.poller import Poller
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import QueueInfo
from sidecar.records.metrics import FlowCollector, metrics_registry
from sidecar.records.queue_series import QueueSeries
from tests.utils.bench_targets import Target, add_target_options  # noqa: E402


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


def per_call(render: Callable[[], object], repeat: int) -> float:
    """Median seconds of one call, after a warm-up."""
    render()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        render()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def baseline_registry(text: bytes) -> CollectorRegistry:
    """Plain Gauges, one per sample name, set by hand to every sample in `text`."""
    registry = CollectorRegistry()
    gauges: dict[str, Gauge] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            names = sorted(sample.labels)
            gauge = gauges.get(sample.name)
            if gauge is None:
                gauge = gauges[sample.name] = Gauge(sample.name, family.documentation,
                                                    names, registry=registry)
            (gauge.labels(**sample.labels) if names else gauge).set(sample.value)
    return registry


def in_process(count: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = FlowEngine(Store(Path(tmp) / "db.sqlite3"), DefaultPolicy(), stale_after=5.0)
        engine.apply_poll(queues(count), now=time.time())
        adapter: BrokerAdapter = None  # type: ignore[assignment]  # never polled here
        registry = metrics_registry(FlowCollector(engine, Poller(adapter, engine, 1.0)))
        series = QueueSeries()

        def scrape(per_queue: bool) -> bytes:
            text = generate_latest(registry)
            if per_queue:
                render = series.scrape()
                entries = engine.entries()
                for start in range(0, len(entries), 250):  # the route's slices
                    render.add(entries[start:start + 250])
                text += render.text()
            return text

        ours_body, aggregates_body = scrape(True), scrape(False)
        base = baseline_registry(ours_body)
        base_body = generate_latest(base)
        ours = per_call(lambda: scrape(True), repeat)
        aggregates = per_call(lambda: scrape(False), repeat)
        baseline = per_call(lambda: generate_latest(base), repeat)
        engine.store.close()
    samples = sum(1 for line in ours_body.splitlines() if not line.startswith(b"#"))
    print(f"queues: {count}, samples: {samples}")
    print(f"per-queue on: {len(ours_body):,} bytes, {ours * 1000:.1f} ms (baseline plain "
          f"Gauges {len(base_body):,} bytes, {baseline * 1000:.1f} ms; ratio "
          f"{ours / baseline:.2f}x)")
    print(f"per-queue off (aggregates): {len(aggregates_body):,} bytes, "
          f"{aggregates * 1000:.2f} ms")


def over_http(target: Target, repeat: int) -> None:
    def timed(url: str, coding: str, auth: tuple[str, str] | None = None) -> tuple[int, float]:
        sizes, times = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            answer = requests.get(url, headers={"Accept-Encoding": coding}, auth=auth,
                                  timeout=120, stream=True)
            sizes.append(len(answer.raw.read()))
            times.append(time.perf_counter() - started)
        return sizes[-1], statistics.median(times)

    modes = [None] if target.sidecar_url else ["on", "auto"]
    for mode in modes:
        options = () if mode is None else ("--metrics-per-queue", mode)
        with target.sidecar(*options, prefix="bench-metrics-") as running:
            count = requests.get(running.url + "/queues?page=1&page_size=1",
                                 timeout=60).json()["total_count"]
            for coding in ("identity", "gzip"):
                size, took = timed(running.url + "/metrics", coding)
                print(f"sidecar /metrics ({mode or 'as running'}, {count} queues, {coding}): "
                      f"{size:,} bytes, median {took * 1000:.0f} ms")
    size, took = timed(target.management_url + "/api/queues", "identity", target.auth)
    print(f"baseline broker GET /api/queues: {size:,} bytes, median {took * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--over-http", action="store_true")
    add_target_options(parser)
    args = parser.parse_args()
    if args.over_http:
        over_http(Target.from_args(args), args.repeat)
    else:
        in_process(args.queues, args.repeat)


if __name__ == "__main__":
    main()
