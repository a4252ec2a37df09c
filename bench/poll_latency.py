"""How fast a threshold crossing reaches producers, and what a poll of 1,000 queues costs.

    .venv/bin/python bench/poll_latency.py [--rounds 10] [--queues 1000]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

1. Crossing latency: publish past a queue's stop threshold (publisher confirms, so the
   broker has the messages), then poll `GET /flow` every 10 ms until it says stopped.
   Baseline in the same run: the time until RabbitMQ's own management API shows the new
   depth, which bounds what any poller of that API can do.
2. Poll cycle: with N extra queues declared, the sidecar's own cycle time (`/healthz`
   `lastCycleSeconds`), against one plain `GET /api/queues` of every column (what a naive
   poller would fetch) in the same run.
Uses the real broker (deploy/ensure-rabbitmq.sh, or the one the options name) and a real
flow-sidecar process with `--no-live-depth`: this is the statistics path, what a queue
that is not hot gets (`bench/live_reaction.py` measures the live one). With
`--sidecar-url` an existing sidecar watching that broker is measured instead (run it with
`--no-live-depth` for the same figures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.bench_targets import add_target_options, amqp_url, sidecar_for  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402


def crossing_latency(sidecar: SidecarProcess, channel: pika.adapters.blocking_connection
                     .BlockingChannel, rounds: int, args: argparse.Namespace
                     ) -> tuple[list[float], list[float]]:
    """Per round: seconds until /flow says stopped, and until the broker's API shows depth."""
    queue = "bench-crossing"
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": 5})
    http = requests.Session()
    http.auth = (args.user, args.password)
    mgmt = args.management_url.rstrip("/")
    eventually(lambda: sidecar.get(f"/flow/{queue}").ok)
    ours, broker = [], []
    try:
        for _ in range(rounds):
            eventually(lambda: sidecar.get(f"/flow/{queue}").json()["flowStopped"] is False)
            time.sleep(0.5)
            for _ in range(6):
                channel.basic_publish("", queue, b"x")  # confirmed: the broker has them
            sent = time.monotonic()
            seen: dict[str, float] = {}
            while len(seen) < 2 and time.monotonic() - sent < 30:
                now = time.monotonic() - sent
                if "broker" not in seen and http.get(
                        f"{mgmt}/api/queues/%2F/{queue}").json().get("messages") == 6:
                    seen["broker"] = now
                if "sidecar" not in seen and sidecar.get(f"/flow/{queue}").json()["flowStopped"]:
                    seen["sidecar"] = now
                time.sleep(0.01)
            ours.append(seen["sidecar"])
            broker.append(seen["broker"])
            channel.queue_purge(queue)
    finally:
        channel.queue_delete(queue)
    return ours, broker


def poll_cycle(sidecar: SidecarProcess, channel: pika.adapters.blocking_connection
               .BlockingChannel, count: int, args: argparse.Namespace
               ) -> tuple[float, float, float]:
    names = [f"bench-many-{i:04d}" for i in range(count)]
    for name in names:
        channel.queue_declare(name, arguments={"x-max-length": 1000,
                                               "x-overflow": "reject-publish"})
    try:
        eventually(lambda: sidecar.get("/healthz").json()["poller"]["queues"] >= count,
                   timeout=60)
        cycles = []
        for _ in range(10):
            time.sleep(1.1)
            cycles.append(sidecar.get("/healthz").json()["poller"]["lastCycleSeconds"])
        naive = []
        for _ in range(5):
            start = time.monotonic()
            requests.get(f"{args.management_url.rstrip('/')}/api/queues",
                         auth=(args.user, args.password), timeout=60).raise_for_status()
            naive.append(time.monotonic() - start)
        return statistics.median(cycles), max(cycles), statistics.median(naive)
    finally:
        for name in names:
            channel.queue_delete(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queues", type=int, default=1000)
    add_target_options(parser)
    args = parser.parse_args()
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url(args)))
    channel = connection.channel()
    channel.confirm_delivery()
    sidecar = sidecar_for(args, "bench-poll-", "--poll-interval", "1.0", "--no-live-depth")
    try:
        ours, broker = crossing_latency(sidecar, channel, args.rounds, args)
        median_cycle, max_cycle, naive = poll_cycle(sidecar, channel, args.queues, args)
    finally:
        sidecar.stop()
        connection.close()
    print(f"crossing -> /flow stopped, {args.rounds} rounds, poll interval 1.0 s, "
          "statistics only:")
    print(f"  sidecar: median {statistics.median(ours):.2f} s, max {max(ours):.2f} s")
    print(f"  broker's own API shows the depth: median {statistics.median(broker):.2f} s, "
          f"max {max(broker):.2f} s")
    ratio = statistics.median(ours) / statistics.median(broker)
    print(f"  ratio sidecar / broker API: {ratio:.2f}")
    print(f"poll cycle with {args.queues} queues: median {median_cycle * 1000:.0f} ms, "
          f"max {max_cycle * 1000:.0f} ms")
    print(f"  one naive GET /api/queues (all columns): {naive * 1000:.0f} ms; "
          f"ratio {median_cycle / naive:.2f}")


if __name__ == "__main__":
    main()
