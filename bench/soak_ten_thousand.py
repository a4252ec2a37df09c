"""Soak: ten thousand queues for 20 minutes, with long-poll waiters and a dashboard open.

    .venv/bin/python bench/soak_ten_thousand.py [--minutes 20] [--queues 10000]
        [--waiters 1000] [--keep-queues] [--show-slow] [--load-nice 10]
        [--cpu-groups [--sidecar-weight N]]
        [target options: tests/utils/bench_targets.py]

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

The load (the waiters, the dashboard, the scrapes: clients that would run on other
machines) runs `--load-nice` levels below the bench, the servers and the probes.

With `--cpu-groups` (root), each party runs in a CPU cgroup of its own, as a systemd
service or a Kubernetes container does (`tests/utils/cpu_groups.py`): the broker and the
load at systemd's default weight (100), the sidecar and the floor at the sidecar unit's
`CPUWeight=` (or `--sidecar-weight`: 25 is what a Kubernetes CPU request of 250m weighs
beside a broker's of one core), the probes at the unit's weight whatever the sidecar's
(a probe that waits for a core makes a fast answer look slow), the sampler at 100.
Without it every process shares one cgroup, where the kernel shares the cores between
threads.

It reports the sidecar's RSS over the first and the last five minutes (a quarter of the
run each when it is shorter), the ERROR lines and tracebacks in its log, the slowest
`/flow` answer, how many took over 5 ms (the target's p99) beside the floor's, where each
server's main thread was during the answers over 20 ms (on a CPU, waiting for one, or
asleep: `tests/utils/thread_states.py`), and the failed requests: how many, what asked (a
long poll, the dashboard, a scrape) and how each failed (the exception, and the status of
an HTTP error). Bounded: it stops after `--minutes` whatever happens, and deletes the
queues it declared unless `--keep-queues`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ten_thousand_queues import NODE_URLS, PREFIX, on_queues, start_node

from tests.utils.bench_targets import (
    FloorServer,
    FlowProbe,
    ProcessCpu,
    add_target_options,
    amqp_url,
    broker_pid,
    coinciding,
    pct,
    sidecar_for,
)
from tests.utils.cpu_groups import DEFAULT_WEIGHT, CpuGroups, unit_weight
from tests.utils.thread_states import ThreadStates


def causes(states: ThreadStates, server: int, client: int,
           slow: list[tuple[float, float]], show: bool) -> str:
    """What the server's main thread did during each slow answer, counted by its largest
    part (`Split.cause`), and how many of them the client itself spent mostly waiting for
    a CPU; with `show`, the answers over 50 ms on a line each, with who had the CPUs."""
    found: collections.Counter[str] = collections.Counter()
    lines = []
    for began, ended in slow:
        split, own = states.during(server, began, ended), states.during(client, began, ended)
        if split is None or own is None:
            found["unsampled"] += 1
            continue
        found[split.cause()] += 1
        found["client waited"] += own.queued > (ended - began) / 2
        if ended - began > 0.05:
            cpus = states.cpus_during(began, ended) or {}
            lines.append(f"\n    at {began:.3f}, {(ended - began) * 1000:.0f} ms: the main "
                         f"thread {split}; the client waited {own.queued * 1000:.0f} ms; the "
                         "CPUs meanwhile: " + ", ".join(
                             f"{who} {used * 1000:.0f} ms" for who, used in cpus.items()))
    return ", ".join(f"{what} {n}" for what, n in found.most_common()) + "".join(
        lines if show else [])


def place(groups: CpuGroups, weight: int, *, sidecar: int, broker: int, floor: int,
          probe: int, floor_probe: int, sampler: int) -> None:
    """Each server, probe and the sampler in a cgroup of its own: the sidecar and the floor
    at `weight`, the probes at the unit's weight (the instrument: a producer on another
    machine does not wait for this one's cores), the broker (when it runs here) and the
    sampler at systemd's default."""
    instrument = unit_weight()
    for party, pid, share in (("sidecar", sidecar, weight), ("floor", floor, weight),
                              ("probe", probe, instrument),
                              ("floor-probe", floor_probe, instrument)):
        groups.place(party, [pid], share)
    if broker:
        groups.place("broker", [broker], DEFAULT_WEIGHT)
    groups.place("sampler", [sampler], DEFAULT_WEIGHT)


def niceness(processes: dict[str, int]) -> str:
    """Each process's nice value (those this user cannot see left out)."""
    found = []
    for name, pid in processes.items():
        if not pid:
            continue  # 0 would name this thread
        with contextlib.suppress(OSError):
            found.append(f"{name} {os.getpriority(os.PRIO_PROCESS, pid)}")
    return ", ".join(found)


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
    """The waiters on a pool of their own, and the dashboard and the scrapes on another, as
    producers, a browser and a Prometheus server are different clients. A waiter then never
    takes a connection the dashboard left idle; its rare `ReadError` (0-2 a run) stayed
    even so (1 in a 2026-11-28 run), so it is not a keep-alive timeout's race."""
    limits = httpx.Limits(max_connections=max(1, waiters),
                          max_keepalive_connections=max(1, waiters))
    async with httpx.AsyncClient(base_url=base, limits=limits) as waiters_client, \
            httpx.AsyncClient(base_url=base) as client:
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

        await asyncio.gather(*(waiter(waiters_client, name, until, counts)
                               for name in names[:waiters]),
                             every(1.0, until, dashboard), every(15.0, until, scrape))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--prometheus-url", default=None)
    parser.add_argument("--keep-queues", action="store_true")
    parser.add_argument("--load-nice", type=int, default=10, help=(
        "niceness the bench's load (the waiters, the dashboard, the scrapes) adds to the "
        "bench's own, after the sidecar, the floor and the probes have started: clients "
        "that would run on other machines then leave the cores to the servers measured. 0: "
        "the same priority (every answer over 50 ms of a 2026-11-28 run came while the load "
        "and the broker held both cores)"))
    parser.add_argument("--show-slow", action="store_true", help=(
        "list each /flow answer over 50 ms: when it began (monotonic clock), how long it "
        "took and where the server's main thread and the client were meanwhile"))
    parser.add_argument("--cpu-groups", action="store_true", help=(
        "run each party in a CPU cgroup of its own, as deployed (needs root)"))
    parser.add_argument("--sidecar-weight", type=int, default=None, help=(
        "with --cpu-groups, the weight of the sidecar and the floor (systemd's scale; "
        "default: deploy/flow-sidecar.service's CPUWeight=)"))
    add_target_options(parser, management=NODE_URLS["management"], amqp=NODE_URLS["amqp"])
    args = parser.parse_args()
    groups = None
    if args.cpu_groups:
        if args.sidecar_url:  # another sidecar's cgroup is its deployment's
            parser.error("--cpu-groups needs the bench's own sidecar, not --sidecar-url")
        try:
            groups = CpuGroups.find()
        except OSError as error:
            parser.error(f"--cpu-groups: {error}")
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
        server = sidecar.proc.pid if sidecar.proc else 0
        broker = broker_pid(urlsplit(url).port or 5672) or 0
        states = ThreadStates([server, floor.pid, probe.pid, floor_probe.pid], {
            "the sidecar": server, "the broker": broker, "the bench's load": os.getpid(),
            "the floor": floor.pid})
        states.start()
        if groups:
            place(groups, args.sidecar_weight or unit_weight(), sidecar=server, broker=broker,
                  floor=floor.pid, probe=probe.pid, floor_probe=floor_probe.pid,
                  sampler=states.pid)
        started = time.monotonic()
        until = started + seconds
        counts = Counts()
        sampler_done = threading.Event()

        def sample_rss() -> None:
            while own and not sampler_done.wait(10):
                rss.append((time.monotonic() - started, own.rss_bytes()))

        sampling = threading.Thread(target=sample_rss, daemon=True)
        sampling.start()
        priorities = niceness({"the sidecar": server, "the floor": floor.pid,
                               "the probes": probe.pid, "the broker": broker})
        os.nice(args.load_nice)  # this thread only (Linux): the one that runs the load
        priorities += f", the load {os.nice(0)}"
        if groups:
            groups.place("load", [os.getpid()])
            priorities += f"; CPU cgroups and their weights: {groups.weights()}"
        asyncio.run(load(sidecar.url, names, args.waiters, until, counts))
        sampler_done.set()
        probe.done.set()
        floor_probe.done.set()
        states.done.set()
        probe.join()
        floor_probe.join()
        states.join()
        floor.stop()
        log = sidecar.log() if sidecar.proc else ""
    finally:
        sidecar.stop()
        if groups:
            groups.remove()
        if not args.keep_queues:
            on_queues(url, names, "queue_delete")
    errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    first = [b for t, b in rss if t <= window]
    last = [b for t, b in rss if t >= seconds - window]
    mb = 2 ** 20
    print(f"soak: {args.minutes:g} min, {args.queues:,} queues, {args.waiters:,} long-poll "
          "waiters, a dashboard refreshing every second, /metrics every 15 s; niceness: "
          f"{priorities}")
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
    print("  where each server's main thread was during the answers over 20 ms (by the "
          "largest part; 'client waited': the probe waited for a CPU over half the answer): "
          f"the sidecar: {causes(states, server, probe.pid, probe.over(0.02), args.show_slow)}"
          "; the floor: " + causes(states, floor.pid, floor_probe.pid, floor_probe.over(0.02),
                                   args.show_slow))
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
