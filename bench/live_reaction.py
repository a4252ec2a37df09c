"""How fast a crossing reaches producers with live depth, the broker at its default 5 s
statistics interval.

    .venv/bin/python bench/live_reaction.py [--rounds 40]

An extra RabbitMQ node with RabbitMQ's defaults (deploy/rabbitmq-node.sh, index 5: AMQP
5705, management 15705, statistics every 5 s) and a real flow-sidecar process reading it
(--poll-interval 1, live depth on, its defaults). A queue with qpid.flow_stop_count=5
has a producer: the long-poll waiter sends X-Producer-Id, as FlowControlledPublisher does,
which makes the queue hot. Each round, at a random moment, 6 messages are published with
publisher confirms
(the broker has them); from the last confirm we time:

- `/flow` says stopped (polled every 2 ms);
- a long-poll waiter parked on `?since=VERSION&wait=30` has its answer;
- baseline, in the same round: RabbitMQ's management API shows the 6 messages (polled
  every 10 ms), which bounds any reader of the statistics, as the sidecar was before.

Then the queue is purged and the round waits for the statistics to show it empty.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

AUTH = ("guest", "guest")
PRODUCER = {"X-Producer-Id": "bench-producer", "X-Producer-Capacity": "10"}


def until(check: Any, since: float, step: float, limit: float = 30.0) -> float:
    """Seconds from `since` (monotonic) until `check()` is truthy, polled every `step`."""
    while not check():
        if time.monotonic() - since > limit:
            raise RuntimeError("timed out")
        time.sleep(step)
    return time.monotonic() - since


def one_round(sidecar: SidecarProcess, channel: Any, queue: str, mgmt: str,
              http: requests.Session) -> tuple[float, float, float]:
    """(to /flow, to the long-poll waiter, to the management API), seconds."""
    version = sidecar.get(f"/flow/{queue}").json()["version"]
    woken: list[float] = []

    def wait() -> None:
        """Long-poll as a producer does: an answer that is not a stop (another field of
        the answer changed) is followed by the next long-poll from its version."""
        since, deadline = version, time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = requests.get(f"{sidecar.url}/flow/{queue}", timeout=40,
                                  headers=PRODUCER,
                                  params={"since": since, "wait": 30}).json()
            if answer["flowStopped"]:
                woken.append(time.monotonic())
                return
            since = answer["version"]

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(random.uniform(0.2, 1.2))  # parked; and a random phase against the rounds
    for _ in range(6):
        channel.basic_publish("", queue, b"x" * 100)
    sent = time.monotonic()
    to_flow = until(lambda: sidecar.get(f"/flow/{queue}").json()["flowStopped"], sent, 0.002)
    to_api = until(lambda: http.get(f"{mgmt}/api/queues/%2F/{queue}", timeout=5)
                   .json().get("messages") == 6, sent, 0.01)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    node = ExtraNode("flowlive", 5).start()
    amqp = node.amqp_url
    connection = pika.BlockingConnection(pika.URLParameters(amqp))
    channel = connection.channel()
    channel.confirm_delivery()
    queue = f"bench-live-{uuid.uuid4().hex[:6]}"
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": 5})
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-live-")), "--management-url",
                             node.management_url, "--amqp-url", amqp,
                             "--poll-interval", "1.0").start()
    http = requests.Session()
    http.auth = AUTH
    rows = []
    try:
        eventually(lambda: sidecar.get(f"/flow/{queue}", headers=PRODUCER).ok, timeout=30)
        for n in range(args.rounds):
            rows.append(one_round(sidecar, channel, queue, node.management_url, http))
            print(f"round {n + 1}: /flow {rows[-1][0] * 1000:.0f} ms, waiter "
                  f"{rows[-1][1] * 1000:.0f} ms, management API {rows[-1][2] * 1000:.0f} ms",
                  file=sys.stderr)
    finally:
        sidecar.stop()
        channel.queue_delete(queue)
        connection.close()
    ms = 1000
    flow, waiter, api = ([r[i] for r in rows] for i in range(3))
    print(f"crossing -> producers, {args.rounds} rounds, broker statistics every 5 s "
          "(RabbitMQ's default), live depth on:")
    for name, values in (("/flow says stopped", flow), ("long-poll waiter woken", waiter),
                         ("baseline: management API shows it", api)):
        print(f"  {name:36s} p50 {pct(values, 50) * ms:7.0f} ms   p99 {pct(values, 99) * ms:7.0f}"
              f" ms   max {max(values) * ms:7.0f} ms")
    met = pct(flow, 50) <= .1 and pct(flow, 99) <= .5
    print(f"  baseline / /flow at p50: {pct(api, 50) / pct(flow, 50):.0f}x; target p50 <= 100 ms "
          f"and p99 <= 500 ms: {'met' if met else 'NOT met'}"
          " (/flow), "
          f"{'met' if pct(waiter, 50) <= .1 and pct(waiter, 99) <= .5 else 'NOT met'} (waiter)")


if __name__ == "__main__":
    main()
