"""Soak: ten thousand queues for 20 minutes, with long-poll waiters and a dashboard open.

    .venv/bin/python bench/soak_ten_thousand.py [--minutes 20] [--queues 10000]
        [--waiters 1000] [--keep-queues] [target options: tests/utils/bench_targets.py]

On the node of bench/ten_thousand_queues.py (flowscale, index 20, RabbitMQ's default
statistics, its Prometheus plugin on) unless the options name a broker, a sidecar with
the defaults (or `--sidecar-url`) watches `--queues` queues while, for `--minutes`:

- `--waiters` long-poll waiters, one on each of as many queues, each asking again as soon
  as it is answered (`?since=VERSION&wait=30`);
- a dashboard open, as `api/static/dashboard.js` reads: every second, one page of 50
  queues stopped first (`GET /queues?page=1&page_size=50&sort=stopped`, `/alarms`,
  `/vhosts`), then the history of that page (`GET /queues/history?...&since=`);
- `GET /metrics` every 15 s, as a Prometheus server would;
- `GET /flow` every 10 ms on one connection, timed;
- the floor: the same requests, every 10 ms from a process of their own, to a bare asyncio
  server in a process of its own (`FloorServer`) that answers with the same bytes and does
  nothing else. Its slow answers are the machine's: a `/flow` answer over 50 ms that
  overlaps a floor answer over 20 ms came when the machine ran neither server.

It reports the sidecar's RSS over the first and the last five minutes (a quarter of the
run each when it is shorter), the ERROR lines and tracebacks in its log, the slowest
`/flow` answer, how many took over 5 ms (the target's p99) beside the floor's, and the
failed requests: how many, what asked (a long poll, the dashboard, a scrape) and how each
failed (the exception, and the status of an HTTP error). Bounded:
it stops after `--minutes` whatever happens, and deletes the queues it declared unless
`--keep-queues`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ten_thousand_queues import NODE_URLS, PREFIX, on_queues, start_node  # noqa: E402

from tests.utils.bench_targets import (  # noqa: E402
    FloorServer,
    FlowProbe,
    ProcessCpu,
    add_target_options,
    amqp_url,
    coinciding,
    pct,
    sidecar_for,
)


def share_over(probe: FlowProbe, seconds: float) -> str:
    """How many of the probe's answers took longer than `seconds`, and their share."""
    slow = len(probe.over(seconds))
    return f"{slow:,} ({100 * slow / max(1, len(probe.latencies)):.2f} %)"


class Counts:
    """What the load saw, shared by its tasks."""

    def __init__(self) -> None:
        self.wakeups = 0
        self.failures: collections.Counter[str] = collections.Counter()
        self.dashboard: list[float] = []

    def failed(self, what: str, error: Exception) -> None:
        """Note a failed request: what asked, and how it failed (the exception's class, and
        the status for an HTTP error), for the report to say which requests fail."""
        status = getattr(getattr(error, "response", None), "status_code", None)
        self.failures[f"{what} {type(error).__name__}" + (f" {status}" if status else "")] += 1


async def waiter(client: httpx.AsyncClient, queue: str, until: float, counts: Counts) -> None:
    """Ask again as soon as answered, as a producer waiting for its queue would."""
    version = None
    while time.monotonic() < until:
        params = {"wait": "30"} if version is None else {"since": str(version), "wait": "30"}
        try:
            answer = await client.get(f"/flow/%2F/{queue}", params=params, timeout=40)
            version = answer.json()["version"]
            counts.wakeups += 1
        except (httpx.HTTPError, ValueError, KeyError) as error:
            counts.failed("long poll", error)
            await asyncio.sleep(1)


async def every(seconds: float, until: float, call: object) -> None:
    while time.monotonic() < until:
        started = time.monotonic()
        await call()  # type: ignore[operator]
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))


async def load(base: str, names: list[str], waiters: int, until: float,
               counts: Counts) -> None:
    limits = httpx.Limits(max_connections=waiters + 10, max_keepalive_connections=waiters + 10)
    async with httpx.AsyncClient(base_url=base, limits=limits) as client:
        since: list[float | None] = [None]

        async def dashboard() -> None:
            started = time.monotonic()
            page = {"page": "1", "page_size": "50", "sort": "stopped"}
            try:
                for answer in await asyncio.gather(
                        *(client.get(path, params=params, timeout=30) for path, params in (
                            ("/queues", page), ("/alarms", {}), ("/vhosts", {})))):
                    answer.raise_for_status()
                params = page if since[0] is None else {**page, "since": str(since[0])}
                asked = time.time()
                (await client.get("/queues/history", params=params,
                                  timeout=30)).raise_for_status()
                since[0] = asked - 10
                counts.dashboard.append(time.monotonic() - started)
            except httpx.HTTPError as error:
                counts.failed("dashboard", error)

        async def scrape() -> None:
            try:
                (await client.get("/metrics", timeout=30)).raise_for_status()
            except httpx.HTTPError as error:
                counts.failed("/metrics", error)

        await asyncio.gather(*(waiter(client, name, until, counts) for name in names[:waiters]),
                             every(1.0, until, dashboard), every(15.0, until, scrape))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--prometheus-url", default=None)
    parser.add_argument("--keep-queues", action="store_true")
    parser.add_argument("--show-slow", action="store_true", help=(
        "list each /flow answer over 50 ms: when it began (monotonic clock) and how long "
        "it took, to set beside a probe's log"))
    add_target_options(parser, management=NODE_URLS["management"], amqp=NODE_URLS["amqp"])
    args = parser.parse_args()
    options = []
    if args.management_url == NODE_URLS["management"]:
        start_node()
        options = ["--prometheus-url", args.prometheus_url or NODE_URLS["prometheus"]]
    elif args.prometheus_url:
        options = ["--prometheus-url", args.prometheus_url]
    names = [f"{PREFIX}{i:05d}" for i in range(args.queues)]
    url = amqp_url(args)
    on_queues(url, names, "queue_declare")
    sidecar = sidecar_for(args, "bench-soak-", *options, ready_within=300)
    try:
        while sidecar.get("/healthz").json()["poller"]["queues"] < args.queues:
            time.sleep(1)
        seconds = args.minutes * 60
        window = min(300.0, seconds / 4)
        own = ProcessCpu(sidecar.proc.pid) if sidecar.proc else None
        rss: list[tuple[float, int]] = []
        floor = FloorServer(sidecar.get(f"/flow/%2F/{names[0]}").content)
        floor.start()
        floor_probe = FlowProbe(floor.url, names[0], path="/flow")
        probe = FlowProbe(sidecar.url, names[0])
        probe.start()
        floor_probe.start()
        started = time.monotonic()
        until = started + seconds
        counts = Counts()
        sampler_done = threading.Event()

        def sample_rss() -> None:
            while own and not sampler_done.wait(10):
                rss.append((time.monotonic() - started, own.rss_bytes()))

        sampling = threading.Thread(target=sample_rss, daemon=True)
        sampling.start()
        asyncio.run(load(sidecar.url, names, args.waiters, until, counts))
        sampler_done.set()
        probe.done.set()
        floor_probe.done.set()
        probe.join()
        floor_probe.join()
        floor.stop()
        log = sidecar.log() if sidecar.proc else ""
    finally:
        sidecar.stop()
        if not args.keep_queues:
            on_queues(url, names, "queue_delete")
    errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    first = [b for t, b in rss if t <= window]
    last = [b for t, b in rss if t >= seconds - window]
    mb = 2 ** 20
    print(f"soak: {args.minutes:g} min, {args.queues:,} queues, {args.waiters:,} long-poll "
          "waiters, a dashboard refreshing every second, /metrics every 15 s")
    if first and last:
        print(f"  sidecar RSS: first {window / 60:.1f} min mean {statistics.mean(first) / mb:.0f}"
              f" MB (max {max(first) / mb:.0f}), last {window / 60:.1f} min mean "
              f"{statistics.mean(last) / mb:.0f} MB (max {max(last) / mb:.0f}); ratio "
              f"{statistics.mean(last) / statistics.mean(first):.2f}")
    slow = probe.over(0.05)
    print(f"  GET /flow every 10 ms: {len(probe.latencies):,} answers, p99 "
          f"{pct(probe.latencies, 99) * 1000:.1f} ms, max {max(probe.latencies) * 1000:.1f} ms, "
          f"{len(slow)} over 50 ms, {probe.errors} errors; {share_over(probe, 0.005)} over "
          f"5 ms (the floor: {share_over(floor_probe, 0.005)})")
    print(f"  the floor, the same requests to a bare asyncio server beside it: "
          f"{len(floor_probe.latencies):,} answers, p99 {pct(floor_probe.latencies, 99) * 1000:.1f}"
          f" ms, max {max(floor_probe.latencies) * 1000:.1f} ms, "
          f"{len(floor_probe.over(0.05))} over 50 ms; of the {len(slow)} /flow answers over "
          f"50 ms, {coinciding(slow, floor_probe.over(0.02))} overlap a floor answer over 20 ms")
    for began, ended in slow if args.show_slow else []:
        print(f"    slow /flow answer at {began:.3f}: {(ended - began) * 1000:.0f} ms")
    if counts.dashboard:
        print(f"  dashboard refresh (a page of /queues, /alarms, /vhosts, its history): median "
              f"{statistics.median(counts.dashboard) * 1000:.0f} ms, max "
              f"{max(counts.dashboard) * 1000:.0f} ms")
    print(f"  long-poll answers: {counts.wakeups:,}; failed requests: "
          f"{sum(counts.failures.values())}" + "".join(
              f"; {what}: {n}" for what, n in counts.failures.most_common()))
    print(f"  ERROR lines and tracebacks in the sidecar's log: {len(errors)}")
    for line in errors[:5]:
        print(f"    {line[:160]}")


if __name__ == "__main__":
    main()
