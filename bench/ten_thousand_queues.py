"""Ten thousand queues: the sidecar's poll, its cost to the broker and to itself, and /flow
while it polls, beside what a naive poller of the management API costs in the same run.

    .venv/bin/python bench/ten_thousand_queues.py [--queues 10000] [--seconds 60]
        [--sources auto,management] [--keep-queues] [target options: tests/utils/bench_targets.py]

By default it starts a RabbitMQ node of its own with RabbitMQ's default statistics
(`deploy/rabbitmq-node.sh start flowscale 20 --prometheus collect_statistics_interval=5000`:
AMQP 5720, management 15720, Prometheus 16720), declares the queues (those already there
are kept), and at the end deletes them (`--keep-queues` leaves them for the next run).
With `--management-url` and friends it uses that broker instead (its node must be on this
machine for its CPU to be read).

In one run it measures:
1. the broker's CPU share with no client at all (the baseline), and what one request of
   each kind costs it and takes: the naive `GET /api/queues`, the unpaged `columns=`
   listing, the same paged by 500, Prometheus `/metrics/detailed` with the queue families,
   and with `queue_coarse_metrics` alone;
2. for each `--sources` value, a sidecar with the defaults and that `--depth-source` (and
   the options the entry adds after a space), over `--seconds`: its poll cycle
   (`lastCycleSeconds`, sampled every second), the broker's CPU share with it polling, its
   own CPU share and RSS, the queues it read live a second, and `GET /flow` latency
   measured every 10 ms by a client in another process, during the polls, beside the
   floor: the same requests at the same time to a bare asyncio server in a process of
   its own that answers with the same bytes (`FloorServer`), what the machine allows.
Ratios against the baseline are printed beside each figure; none is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pika
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.utils.bench_targets import (  # noqa: E402
    ROOT,
    FloorServer,
    FlowProbe,
    ProcessCpu,
    add_target_options,
    amqp_url,
    broker_pid,
    pct,
    sidecar_for,
)

NODE = ("flowscale", "20")
NODE_URLS = {"management": "http://127.0.0.1:15720", "amqp": "amqp://127.0.0.1:5720/%2F",
             "prometheus": "http://127.0.0.1:16720"}
COLUMNS = ("name,vhost,type,messages,message_bytes,messages_unacknowledged,arguments,"
           "effective_policy_definition,policy,message_stats.publish_details.rate,"
           "message_stats.deliver_get_details.rate")
PREFIX = "scale-"


def start_node() -> None:
    subprocess.run(["bash", str(ROOT / "deploy" / "rabbitmq-node.sh"), "start", *NODE,
                    "--prometheus", "collect_statistics_interval=5000"], check=True)


def on_queues(url: str, names: list[str], action: str, connections: int = 4) -> float:
    """`queue_declare` or `queue_delete` of every name, over a few connections at once;
    seconds it took."""
    started = time.monotonic()

    def part(chunk: list[str]) -> None:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        channel = connection.channel()
        for name in chunk:
            getattr(channel, action)(name)
        connection.close()

    threads = [threading.Thread(target=part, args=(names[i::connections],))
               for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - started


def share(cpu: ProcessCpu, seconds: float) -> float:
    """CPU share of a core the process used over the next `seconds`."""
    before, started = cpu.seconds(), time.monotonic()
    time.sleep(seconds)
    return (cpu.seconds() - before) / (time.monotonic() - started)


def request_cost(http: requests.Session, cpu: ProcessCpu | None, url: str,
                 rounds: int = 3) -> tuple[float, float | None, int]:
    """Median seconds a GET takes, the broker CPU seconds it costs, and its size."""
    took, spent, size = [], [], 0
    for _ in range(rounds):
        before = cpu.seconds() if cpu else 0.0
        started = time.monotonic()
        size = len(http.get(url, timeout=120).content)
        took.append(time.monotonic() - started)
        spent.append(cpu.seconds() - before if cpu else 0.0)
    return statistics.median(took), statistics.median(spent) if cpu else None, size


def paged_cost(http: requests.Session, base: str) -> float:
    started = time.monotonic()
    page = 1
    while True:
        body = http.get(f"{base}/api/queues", params={"page": page, "page_size": 500,
                                                      "columns": COLUMNS}, timeout=120).json()
        if page >= body["page_count"]:
            return time.monotonic() - started
        page += 1


def run_sidecar(args: argparse.Namespace, variant: str, broker: ProcessCpu | None,
                queue: str, prometheus: str | None) -> dict[str, Any]:
    source, *extra = variant.split()
    options = ["--depth-source", source, *extra] + (
        ["--prometheus-url", prometheus] if prometheus else [])
    sidecar = sidecar_for(args, f"bench-10k-{source}-", *options, ready_within=300)
    try:
        started = time.monotonic()
        while sidecar.get("/healthz").json()["poller"]["queues"] < args.queues:
            if time.monotonic() - started > 300:
                raise SystemExit("the sidecar did not list every queue within 300 s")
            time.sleep(1)
        time.sleep(5)  # the first polls' new entries are behind it
        own = ProcessCpu(sidecar.proc.pid) if sidecar.proc else None
        floor = FloorServer(sidecar.get(f"/flow/%2F/{queue}").content)
        floor.start()
        floor_probe = FlowProbe(floor.url, queue, path="/flow")
        probe = FlowProbe(sidecar.url, queue)
        probe.start()
        floor_probe.start()
        cycles, rss = [], []
        broker_before = broker.seconds() if broker else 0.0
        samples_before = sidecar.get("/healthz").json()["live"]["samples"]
        own_before = own.seconds() if own else 0.0
        window = time.monotonic()
        while time.monotonic() - window < args.seconds:
            time.sleep(1)
            health = sidecar.get("/healthz").json()
            cycles.append(health["poller"]["lastCycleSeconds"] or 0.0)
            if own:
                rss.append(own.rss_bytes())
        elapsed = time.monotonic() - window
        probe.done.set()
        floor_probe.done.set()
        probe.join()
        floor_probe.join()
        floor.stop()
        return {
            "source": source,
            "active": health.get("depthSource", {}).get("active"),
            "bytes_every": health.get("depthSource", {}).get("bytesEverySeconds"),
            "cycle_median": statistics.median(cycles), "cycle_max": max(cycles),
            "broker_share": (broker.seconds() - broker_before) / elapsed if broker else None,
            "own_share": (own.seconds() - own_before) / elapsed if own else None,
            "rss_max": max(rss) if rss else None,
            "live_rate": (health["live"]["samples"] - samples_before) / elapsed,
            "live_pass": health["live"]["fullPassSeconds"],
            "flow_p50": pct(probe.latencies, 50), "flow_p99": pct(probe.latencies, 99),
            "flow_max": max(probe.latencies), "flow_count": len(probe.latencies),
            "flow_errors": probe.errors, "floor_p99": pct(floor_probe.latencies, 99),
            "floor_max": max(floor_probe.latencies),
        }
    finally:
        sidecar.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sources", default="auto,management", help=(
        "comma-separated depth sources, each run with a sidecar of its own; an entry may "
        "add sidecar options after a space: 'auto,auto --no-live-depth'"))
    parser.add_argument("--prometheus-url", default=None)
    parser.add_argument("--keep-queues", action="store_true")
    add_target_options(parser, management=NODE_URLS["management"], amqp=NODE_URLS["amqp"])
    args = parser.parse_args()
    if args.management_url == NODE_URLS["management"]:
        start_node()
    prometheus = args.prometheus_url or (NODE_URLS["prometheus"] if args.management_url
                                         == NODE_URLS["management"] else None)
    url = amqp_url(args)
    names = [f"{PREFIX}{i:05d}" for i in range(args.queues)]
    print(f"declaring {len(names):,} queues: {on_queues(url, names, 'queue_declare'):.1f} s",
          flush=True)
    pid = broker_pid(urlsplit(args.amqp_url).port or 5672)
    broker = ProcessCpu(pid) if pid else None
    http = requests.Session()
    http.auth = (args.user, args.password)
    base = args.management_url.rstrip("/")
    try:
        time.sleep(6)  # a statistics round for every queue
        idle = share(broker, 20) if broker else None
        print(f"broker CPU with no client: {idle:.1%} of a core" if idle is not None
              else "broker CPU: not readable (not a process of this machine)", flush=True)
        requests_ = {"naive GET /api/queues": f"{base}/api/queues",
                     "columns=, unpaged": f"{base}/api/queues?columns={COLUMNS}"}
        if prometheus:
            requests_["Prometheus queue families"] = (
                f"{prometheus}/metrics/detailed?family=queue_coarse_metrics"
                "&family=queue_metrics")
            requests_["Prometheus queue_coarse_metrics"] = (
                f"{prometheus}/metrics/detailed?family=queue_coarse_metrics")
        naive = None
        for label, target in requests_.items():
            took, spent, size = request_cost(http, broker, target)
            naive = naive or took
            cost = "" if spent is None else f", broker CPU {spent:.2f} s"
            print(f"  {label}: {took:.2f} s ({took / naive:.2f}x naive), {size / 1e6:.1f} MB"
                  f"{cost}", flush=True)
        paged = paged_cost(http, base)
        print(f"  columns=, paged by 500: {paged:.2f} s ({paged / naive:.2f}x naive)")
        for source in args.sources.split(","):
            got = run_sidecar(args, source, broker, names[0], prometheus)
            print(f"sidecar --depth-source {source} (active: {got['active']}, bytes every "
                  f"{got['bytes_every']} s), {args.seconds:.0f} s:")
            print(f"  poll cycle: median {got['cycle_median']:.2f} s, max "
                  f"{got['cycle_max']:.2f} s ({got['cycle_median'] / naive:.2f}x one naive "
                  "GET /api/queues)")
            if got["broker_share"] is not None and idle is not None:
                print(f"  broker CPU: {got['broker_share']:.1%} of a core, "
                      f"{got['broker_share'] - idle:+.1%} over no client "
                      f"({got['broker_share'] / max(idle, 1e-9):.1f}x)")
            if got["own_share"] is not None:
                print(f"  sidecar: CPU {got['own_share']:.1%} of a core, RSS max "
                      f"{got['rss_max'] / 2**20:.0f} MB")
            turn = ("longer than the run so far" if got["live_pass"] is None
                    else f"{got['live_pass']:.1f} s")
            print(f"  live depth: {got['live_rate']:.0f} queues read a second, a turn of the "
                  f"idle ones {turn}")
            print(f"  GET /flow every 10 ms during polls ({got['flow_count']} requests, "
                  f"{got['flow_errors']} errors): p50 {got['flow_p50'] * 1000:.2f} ms, "
                  f"p99 {got['flow_p99'] * 1000:.2f} ms, max {got['flow_max'] * 1000:.1f} ms; "
                  f"the floor beside it p99 {got['floor_p99'] * 1000:.2f} ms, max "
                  f"{got['floor_max'] * 1000:.1f} ms", flush=True)
    finally:
        if not args.keep_queues:
            on_queues(url, names, "queue_delete")
            print(f"deleted the {len(names):,} queues")


if __name__ == "__main__":
    main()
