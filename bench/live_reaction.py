"""How fast a crossing reaches producers with live depth, the broker at its default 5 s
statistics interval, for a queue sitting near its stop and for one the statistics show idle.

    .venv/bin/python bench/live_reaction.py [--rounds 40] [--queues 10] [--idle 15]
        [--scenario near|idle|both] [--others-near] [--live-budget B]
        [--management-url URL --amqp-url URL --user U --password P] [--sidecar-url URL]

An extra RabbitMQ node with RabbitMQ's defaults (deploy/rabbitmq-node.sh, index 5: AMQP
5705, management 15705, statistics every 5 s) and a real flow-sidecar process reading it
(--poll-interval 1, live depth on, its defaults: no --broker-stats-lag). `--queues` watched
queues in all (stop 100 each; the others sit empty), one of them measured; with
`--others-near` the others sit at their stop instead (10 messages, stop 10: every one is
hot, and closer to its stop than the measured queue at 90 of 100, so the measured queue
is the one the sampler reads least often: the worst case of 1,000 queues near their stop,
each to be read at least every 250 ms). Each round:

- near: the queue sits at 90 (within the hot band of its stop), then at a random moment
  11 messages are published with publisher confirms, the last one over the stop;
- idle: the queue sits empty for `--idle` seconds (the statistics show it at 0: not hot,
  no producer asking), then 101 messages;

and from the last confirm (the broker has the message that crossed the stop) we time:

- `/flow` says stopped (polled every 2 ms);
- a long-poll waiter parked on `?since=VERSION&wait=30` has its answer (it does not say
  X-Producer-Id: that would make the queue hot);
- baseline, in the same round: RabbitMQ's management API shows the messages (polled
  every 10 ms), which bounds any reader of the statistics, as the sidecar was before.

`--management-url` and friends name another broker (default: the flowlive node), and
`--sidecar-url` an existing sidecar watching it, with live depth on.

Then the queue is purged (count-only thresholds and no consumer: a live sample may
release it) and the round waits for the statistics to show it empty.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.bench_targets import add_target_options, amqp_url, sidecar_for  # noqa: E402
from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

STOP = 100
# count only (a live sample of a queue without consumers then bounds its depth)
THRESHOLDS = {"qpid.flow_stop_count": STOP, "qpid.flow_stop_size": 0}
NEAR = {"qpid.flow_stop_count": 10, "qpid.flow_stop_size": 0}  # the others, with 10 in each


def until(check: Any, since: float, step: float, limit: float = 30.0) -> float:
    """Seconds from `since` (monotonic) until `check()` is truthy, polled every `step`."""
    while not check():
        if time.monotonic() - since > limit:
            raise RuntimeError("timed out")
        time.sleep(step)
    return time.monotonic() - since


def one_round(sidecar: SidecarProcess, channel: Any, queue: str, mgmt: str,
              http: requests.Session, start: int, idle: float) -> tuple[float, float, float]:
    """(to /flow, to the long-poll waiter, to the management API), seconds."""
    for _ in range(start):
        channel.basic_publish("", queue, b"x" * 100)
    until(lambda: http.get(f"{mgmt}/api/queues/%2F/{queue}", timeout=5)
          .json().get("messages") == start, time.monotonic(), 0.05)
    time.sleep(idle)
    version = sidecar.get(f"/flow/{queue}").json()["version"]
    woken: list[float] = []

    def wait() -> None:
        """Long-poll as a producer does: an answer that is not a stop (another field of
        the answer changed) is followed by the next long-poll from its version."""
        since, deadline = version, time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = requests.get(f"{sidecar.url}/flow/{queue}", timeout=40,
                                  params={"since": since, "wait": 30}).json()
            if answer["flowStopped"]:
                woken.append(time.monotonic())
                return
            since = answer["version"]

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(random.uniform(0.2, 1.2))  # parked; and a random phase against the rounds
    for _ in range(STOP + 1 - start):  # the last one crosses the stop
        channel.basic_publish("", queue, b"x" * 100)
    sent = time.monotonic()
    to_flow = until(lambda: sidecar.get(f"/flow/{queue}").json()["flowStopped"], sent, 0.002)
    to_api = until(lambda: http.get(f"{mgmt}/api/queues/%2F/{queue}", timeout=5)
                   .json().get("messages") == STOP + 1, sent, 0.01)
    waiter.join(40)
    if not woken:
        raise RuntimeError("the long-poll waiter was not woken by the stop")
    channel.queue_purge(queue)
    until(lambda: not sidecar.get(f"/flow/{queue}").json()["flowStopped"], time.monotonic(),
          0.01)
    until(lambda: http.get(f"{mgmt}/api/queues/%2F/{queue}", timeout=5)
          .json().get("messages") == 0, time.monotonic(), 0.05)
    return to_flow, woken[0] - sent, to_api


def pct(values: list[float], p: int) -> float:
    """The p-th percentile (inclusive method; p99 of few rounds is close to the max)."""
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def report(title: str, rows: list[tuple[float, float, float]]) -> None:
    ms = 1000
    flow, waiter, api = ([r[i] for r in rows] for i in range(3))
    print(title)
    for name, values in (("/flow says stopped", flow), ("long-poll waiter woken", waiter),
                         ("baseline: management API shows it", api)):
        print(f"  {name:36s} p50 {pct(values, 50) * ms:7.0f} ms   p99 {pct(values, 99) * ms:7.0f}"
              f" ms   max {max(values) * ms:7.0f} ms")
    met = pct(flow, 50) <= .1 and pct(flow, 99) <= .5
    print(f"  baseline / /flow at p50: {pct(api, 50) / pct(flow, 50):.0f}x; target p50 <= 100 ms "
          f"and p99 <= 500 ms: {'met' if met else 'NOT met'}"
          " (/flow), "
          f"{'met' if pct(waiter, 50) <= .1 and pct(waiter, 99) <= .5 else 'NOT met'} (waiter)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--queues", type=int, default=10, help="watched queues in all")
    parser.add_argument("--idle", type=float, default=15.0, help="seconds idle before a burst")
    parser.add_argument("--scenario", choices=["near", "idle", "both"], default="both")
    parser.add_argument("--others-near", action="store_true", help=(
        "the other queues sit at their stop (all hot, closer than the measured one)"))
    parser.add_argument("--live-budget", type=float, default=None, help=(
        "the sidecar's --live-budget (default: its default)"))
    add_target_options(parser, management="", amqp="")  # default: the flowlive node
    args = parser.parse_args()
    if not args.management_url:
        node = ExtraNode("flowlive", 5).start()
        args.management_url, args.amqp_url = node.management_url, node.amqp_url
    mgmt = args.management_url.rstrip("/")
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url(args)))
    channel = connection.channel()
    channel.confirm_delivery()
    prefix = f"bench-live-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(args.queues)]
    channel.queue_declare(names[0], arguments=THRESHOLDS)
    for name in names[1:]:
        channel.queue_declare(name, arguments=NEAR if args.others_near else THRESHOLDS)
        for _ in range(10 if args.others_near else 0):
            channel.basic_publish("", name, b"x" * 100)
    queue = names[0]
    budget = () if args.live_budget is None else ("--live-budget", str(args.live_budget))
    sidecar = sidecar_for(args, "bench-live-", "--poll-interval", "1.0", *budget)
    http = requests.Session()
    http.auth = (args.user, args.password)
    scenarios = [("near", 90, 0.0), ("idle", 0, args.idle)]
    try:
        eventually(lambda: sidecar.get(f"/flow/{queue}").ok, timeout=30)
        eventually(lambda: http.get(f"{mgmt}/api/queues/%2F/{queue}",
                                    timeout=5).json().get("messages") == 0, timeout=30)
        for label, start, idle in scenarios:
            if args.scenario not in (label, "both"):
                continue
            rows = []
            for n in range(args.rounds):
                rows.append(one_round(sidecar, channel, queue, mgmt, http,
                                      start, idle))
                print(f"{label} round {n + 1}: /flow {rows[-1][0] * 1000:.0f} ms, waiter "
                      f"{rows[-1][1] * 1000:.0f} ms, management API "
                      f"{rows[-1][2] * 1000:.0f} ms", file=sys.stderr)
            live = sidecar.get("/healthz").json()["live"]
            others = "near their stop" if args.others_near else "empty"
            report(f"{label}: a burst of {STOP + 1 - start} into a queue at {start} (stop "
                   f"{STOP}), "
                   f"{args.rounds} rounds, {args.queues} watched queues (the others "
                   f"{others}), broker statistics every 5 s (RabbitMQ's default), live depth "
                   f"on (budget {live['budget']:g}/s, {live['hotQueues']} hot, the longest "
                   f"wait between two reads of a hot queue {live.get('hotReadGapSeconds')} s,"
                   f" full pass {live['fullPassSeconds']} s):", rows)
    finally:
        sidecar.stop()
        for name in reversed(names):
            channel.queue_delete(name)
        connection.close()


if __name__ == "__main__":
    main()
