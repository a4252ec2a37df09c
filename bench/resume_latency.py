"""How soon a drained queue resumes at RabbitMQ's default 5 s statistics, for queues that
watch their size (the default queue limit's thresholds) as well as their count, against
the rule before issue 44 measured in the same run.

    .venv/bin/python bench/resume_latency.py [--rounds 10] [--scenario purge|batch|prefetch|all]

The extra node flowlive (deploy/rabbitmq-node.sh, index 5: RabbitMQ's defaults, statistics
every 5 s) and two flow-sidecar processes reading it (--poll-interval 1, live depth on,
defaults otherwise): the current one, and the baseline, the same code with the rule before
(`live_can_release` refused every stopped queue whose size is watched, so such a queue was
not read live and resumed on statistics newer than its drain): this file run with
`--baseline-sidecar`. One queue a scenario, count thresholds 100/50 and the default size
thresholds (80 % / 70 % of the default queue limit, 100 MiB). Each round:

- 150 messages of 100 bytes, confirmed (over the count stop); both sidecars say stopped
  and the statistics show the 150 (only a live read can release it before the next ones);
- the drain:
  - purge: `queue.purge`, no consumer;
  - batch: a consumer (manual ack, prefetch 50) subscribes, takes and acknowledges all
    150 and cancels;
  - prefetch: a consumer that stays (manual ack, prefetch 10, subscribed before the
    fill, holding 10 unacknowledged) acknowledges everything as it comes; nothing proves
    from outside that its window is empty, so no live figure bounds the bytes and both
    rules wait for the statistics (shown for what the rule does not cover);
- from the end of the drain (purge-ok; cancel-ok; the last acknowledgement sent) to
  `/flow` flowing on each sidecar, polled every 2 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.paths import flow_path  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

THRESHOLDS = {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 50}  # size: default
FILL = 150
SCENARIOS = ("purge", "batch", "prefetch")


def baseline_sidecar(argv: list[str]) -> None:
    """flow-sidecar with the rule before issue 44: a stopped queue is read live only when
    its size is not watched and its unacknowledged bound leaves room under the resume."""
    from api.main import main
    from sidecar.flow import live_sampler
    from sidecar.flow.live_depth import unacked_bound

    def before(info: Any, thresholds: Any) -> bool:
        extra = unacked_bound(info)
        return (thresholds.size is None and thresholds.count is not None
                and extra is not None and extra < thresholds.count.resume)

    live_sampler.live_can_release = before
    main(argv)


class Consumer:
    """A manual-ack consumer of its own connection that holds what it gets until told to
    acknowledge (pika's callbacks run inside `process_data_events`)."""

    def __init__(self, url: str, queue: str, prefetch: int, acking: bool) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self.channel.basic_qos(prefetch_count=prefetch)
        self.held: list[int] = []
        self.acking, self.acked = acking, 0
        self.tag = self.channel.basic_consume(queue, self._take)

    def _take(self, channel: Any, method: Any, _props: Any, _body: bytes) -> None:
        if self.acking:
            channel.basic_ack(method.delivery_tag)
            self.acked += 1
        else:
            self.held.append(method.delivery_tag)

    def settle(self) -> None:
        """Let deliveries in (held while not acking)."""
        self.connection.process_data_events(0.05)

    def drain(self, total: int) -> None:
        """Acknowledge what it holds and all that comes, until `total` are acknowledged."""
        self.acking = True
        for tag in self.held:
            self.channel.basic_ack(tag)
            self.acked += 1
        self.held.clear()
        deadline = time.monotonic() + 30
        while self.acked < total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.acked} of {total} delivered")
            self.connection.process_data_events(0.005)

    def close(self) -> None:
        self.connection.close()


def flowing(sidecar: SidecarProcess, queue: str) -> bool:
    return not sidecar.get(flow_path(queue)).json()["flowStopped"]


def one_round(scenario: str, node: ExtraNode, channel: Any, queue: str,
              sidecars: list[SidecarProcess], http: requests.Session) -> list[float]:
    """Seconds from the end of the drain to /flow flowing, one per sidecar."""
    stay = (Consumer(node.amqp_url, queue, 10, acking=False)
            if scenario == "prefetch" else None)
    try:
        for _ in range(FILL):
            channel.basic_publish("", queue, b"x" * 100)
        for sidecar in sidecars:
            eventually(lambda s=sidecar: not flowing(s, queue), timeout=30)
        eventually(lambda: http.get(f"{node.management_url}/api/queues/%2F/{queue}",
                                    timeout=5).json().get("messages") == FILL, timeout=30)
        if stay is not None:
            stay.settle()
            stay.drain(FILL)
        elif scenario == "batch":
            batch = Consumer(node.amqp_url, queue, 50, acking=True)
            batch.drain(FILL)
            batch.channel.basic_cancel(batch.tag)
            batch.close()
        else:
            channel.queue_purge(queue)
        drained = time.monotonic()
        took: list[float | None] = [None] * len(sidecars)
        while None in took:
            if time.monotonic() - drained > 60:
                raise RuntimeError("not flowing within 60 s")
            for i, sidecar in enumerate(sidecars):
                if took[i] is None and flowing(sidecar, queue):
                    took[i] = time.monotonic() - drained
            if stay is not None:
                stay.settle()  # keeps its connection serviced
            else:
                time.sleep(0.002)
        return [t for t in took if t is not None]
    finally:
        if stay is not None:
            stay.close()


def pct(values: list[float], p: int) -> float:
    """The p-th percentile (inclusive method; p99 of few rounds is close to the max)."""
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def report(scenario: str, rows: list[list[float]]) -> None:
    ms = 1000
    print(f"{scenario}: {len(rows)} rounds, count 100/50 + default size thresholds, "
          f"statistics every 5 s")
    for i, name in enumerate(("this rule", "baseline: the rule before")):
        values = [r[i] for r in rows]
        print(f"  {name:27s} p50 {pct(values, 50) * ms:7.0f} ms   p99 "
              f"{pct(values, 99) * ms:7.0f} ms   max {max(values) * ms:7.0f} ms")
    new, old = ([r[i] for r in rows] for i in (0, 1))
    met = pct(new, 50) <= .2 and pct(new, 99) <= 1.0
    print(f"  baseline / this rule at p50: {pct(old, 50) / pct(new, 50):.1f}x; target p50 <= "
          f"200 ms and p99 <= 1 s: {'met' if met else 'NOT met'}")


def start(command: list[str] | None, node: ExtraNode) -> SidecarProcess:
    return SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-resume-")), "--management-url",
                          node.management_url, "--management-user", node.auth[0],
                          "--poll-interval", "1.0", command=command,
                          env={"FLOW_MANAGEMENT_PASSWORD": node.auth[1],
                               "FLOW_AMQP_URL": node.amqp_url}).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    args = parser.parse_args()
    node = ExtraNode("flowlive", 5).start()
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    channel = connection.channel()
    channel.confirm_delivery()
    http = requests.Session()
    http.auth = node.auth
    sidecars = [start(None, node),
                start([sys.executable, str(Path(__file__).resolve()), "--baseline-sidecar"],
                      node)]
    queues: list[str] = []
    try:
        for scenario in SCENARIOS:
            if args.scenario not in (scenario, "all"):
                continue
            queue = f"bench-resume-{scenario}-{uuid.uuid4().hex[:6]}"
            channel.queue_declare(queue, arguments=THRESHOLDS)
            queues.append(queue)
            for sidecar in sidecars:
                eventually(lambda s=sidecar, q=queue: s.get(flow_path(q)).ok and flowing(s, q),
                           timeout=30)
            eventually(lambda q=queue: http.get(f"{node.management_url}/api/queues/%2F/{q}",
                                                timeout=5).json().get("messages_unacknowledged")
                       is not None, timeout=30)
            rows = []
            for n in range(args.rounds):
                rows.append(one_round(scenario, node, channel, queue, sidecars, http))
                print(f"{scenario} round {n + 1}: this rule {rows[-1][0] * 1000:.0f} ms, "
                      f"baseline {rows[-1][1] * 1000:.0f} ms", file=sys.stderr)
            report(scenario, rows)
            lags = [s.get("/healthz").json()["statisticsLag"]["effective"] for s in sidecars]
            print(f"  statistics lag in use (s): this rule {lags[0]}, baseline {lags[1]}")
    finally:
        for sidecar in sidecars:
            sidecar.stop()
        for queue in queues:
            channel.queue_delete(queue)
        connection.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--baseline-sidecar"]:
        baseline_sidecar(sys.argv[2:])
    else:
        main()
