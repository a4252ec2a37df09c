"""Pacing against binary stop-and-go on the real broker: producers offering 3x what the
consumers take (issue 43 item 2; docs/graded-flow.md "Pacing").

    .venv/bin/python bench/pacing.py [--seconds 150] [--consumer-rate 200]

A flow-sidecar process started here (poll 1 s, the test broker's 1 s statistics and its
`--broker-stats-lag` of 3 s, live depth on), and per run a queue of its own with stop
1,000 / resume 800 messages, deleted afterwards. A consumer takes `--consumer-rate`
messages/s (prefetch 50, a sleep between acks, in a process of its own); three producers
(the blocking `FlowControlledPublisher`, `grants="off"`: credit grants alone already keep
a queue under its stop, and the comparison is with Qpid's stop-and-go) each offer the same
rate, 3x in all.
Run A: `pacing=False`, Qpid's binary stop-and-go; run B: `pacing=True`, the producers send
at the `suggestedRate` the sidecar offers them. Printed per run: stops per minute (the
queue's flowStoppedCount), the depth's amplitude (max - min of the management API's depth
sampled every 0.5 s over the second half), throughput against the consumer's rate (over the
second half) and the p99 age of the messages the consumer took then (a timestamp in each
body); then B/A. Targets: at most one stop in B, B's amplitude at most half of A's, B's
throughput at least 0.95 x the consumer's rate. The machine is shared: figures move from
run to run; the ratios are what a run compares.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import statistics
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import quote

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flow_sidecar_client.publisher import FlowControlledPublisher
from tests.utils.broker_target import AMQP_URL, AUTH, MANAGEMENT_URL
from tests.utils.sidecar_process import SidecarProcess, eventually

STOP, RESUME, PRODUCERS, PREFETCH = 1_000, 800, 3, 50
STAMP = struct.Struct("!d")  # the moment a message was published, in its body


@dataclass
class Run:
    """What one run measured."""

    name: str
    seconds: float
    consumer_rate: float
    stops: int = 0
    depths: list[tuple[float, int]] = field(default_factory=list)  # (since start, depth)
    taken: list[tuple[float, float]] = field(default_factory=list)  # (since start, age s)

    def second_half(self) -> float:
        return self.seconds / 2

    @property
    def stops_per_minute(self) -> float:
        return self.stops / (self.seconds / 60)

    @property
    def amplitude(self) -> int:
        late = [d for t, d in self.depths if t >= self.second_half()]
        return max(late) - min(late) if late else 0

    @property
    def throughput(self) -> float:
        return sum(1 for t, _ in self.taken if t >= self.second_half()) / self.second_half()

    @property
    def age_p99(self) -> float:
        ages = [a for t, a in self.taken if t >= self.second_half()]
        return statistics.quantiles(ages, n=100)[98] if len(ages) > 1 else 0.0


def consume(queue: str, rate: float, start: float, until: float,
            results: Connection) -> None:
    """In a process of its own (the producers' threads hold the GIL): take `rate`
    messages/s (a sleep between acks) until `until`, then send back each message's
    (moment since `start`, age)."""
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=PREFETCH)
    taken, due = [], time.time()
    for method, _props, body in channel.consume(queue, inactivity_timeout=0.2):
        now = time.time()
        if now >= until:
            break
        if method is None:
            due = now  # idle: no catching up afterwards
            continue
        taken.append((now - start, now - STAMP.unpack(body[:STAMP.size])[0]))
        channel.basic_ack(method.delivery_tag)
        due = max(due + 1 / rate, now - 1 / rate)
        time.sleep(max(0.0, due - time.time()))
    channel.cancel()
    connection.close()
    results.send(taken)


def produce(queue: str, url: str, rate: float, pacing: bool, name: str,
            stop: threading.Event) -> None:
    """Offer `rate` messages/s; whatever flow control and pacing hold back is not made up."""
    with FlowControlledPublisher(queue, amqp=AMQP_URL, sidecar_url=url, capacity=50,
                                 pacing=pacing, producer_id=name, grants="off") as publisher:
        due = time.monotonic()
        while not stop.is_set():
            publisher.publish(STAMP.pack(time.time()) + b"x" * 100)
            due = max(due + 1 / rate, time.monotonic())
            time.sleep(max(0.0, due - time.monotonic()))


def watch_depth(queue: str, run: Run, start: float, stop: threading.Event) -> None:
    """The broker's depth every 0.5 s (its statistics refresh every second)."""
    http = requests.Session()
    http.auth = AUTH
    path = f"{MANAGEMENT_URL}/api/queues/%2F/{quote(queue, safe='')}?columns=messages"
    while not stop.wait(0.5):
        answer = http.get(path, timeout=5).json()
        if "messages" in answer:
            run.depths.append((time.time() - start, answer["messages"]))


def one_run(sidecar: SidecarProcess, name: str, pacing: bool, seconds: float,
            rate: float) -> Run:
    queue = f"bench-pacing-{name}-{int(time.time())}"
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": STOP,
                                            "qpid.flow_resume_count": RESUME,
                                            "qpid.flow_stop_size": 0})
    run = Run(name, seconds, rate)
    flow = f"/flow/%2F/{quote(queue, safe='')}"
    try:
        eventually(lambda: sidecar.get(flow).ok, timeout=30)
        before = sidecar.get(flow).json()["flowStoppedCount"]
        stop, start = threading.Event(), time.time()
        results, sending = multiprocessing.Pipe(duplex=False)
        consumer = multiprocessing.Process(target=consume, args=(
            queue, rate, start, start + seconds, sending))
        consumer.start()
        threads = [threading.Thread(target=watch_depth, args=(queue, run, start, stop)),
                   *(threading.Thread(target=produce, args=(
                       queue, sidecar.url, rate, pacing, f"{name}-p{i}", stop))
                     for i in range(PRODUCERS))]
        for thread in threads:
            thread.start()
        run.taken = results.recv()
        stop.set()
        run.stops = sidecar.get(flow).json()["flowStoppedCount"] - before
        consumer.join(30)
        channel.queue_purge(queue)  # producers held by a stop get their go, and end
        for thread in threads:
            thread.join(60)
    finally:
        channel.queue_delete(queue)
        connection.close()
    return run


def report(run: Run) -> dict[str, float]:
    figures = {"stops_per_minute": round(run.stops_per_minute, 2), "stops": run.stops,
               "amplitude": run.amplitude,
               "throughput_vs_consumers": round(run.throughput / run.consumer_rate, 3),
               "age_p99_s": round(run.age_p99, 2)}
    print(f"{run.name}: {json.dumps(figures)}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=150.0, help="per run (>= 120 "
                        "for the issue's figures; 20 for a smoke test)")
    parser.add_argument("--consumer-rate", type=float, default=200.0,
                        help="messages/s the consumer takes; each producer offers as much")
    args = parser.parse_args()
    logging.getLogger("flow_sidecar.client").setLevel(logging.ERROR)  # Qpid's notices
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-pacing-")),
                             "--poll-interval", "1").start()
    try:
        a = report(one_run(sidecar, "A-binary", False, args.seconds, args.consumer_rate))
        b = report(one_run(sidecar, "B-paced", True, args.seconds, args.consumer_rate))
    finally:
        sidecar.stop()
    ratios = {k: round(b[k] / a[k], 3) if a[k] else None for k in a}
    print(f"B/A: {json.dumps(ratios)}")
    print(f"targets: B stops <= 1: {b['stops'] <= 1}; B amplitude <= A/2: "
          f"{b['amplitude'] <= a['amplitude'] / 2}; B throughput >= 0.95: "
          f"{b['throughput_vs_consumers'] >= 0.95}")


if __name__ == "__main__":
    main()
