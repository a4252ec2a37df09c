"""What live depth costs the broker and the sidecar, with 100 and 1,000 hot queues.

    .venv/bin/python bench/live_cost.py [--queues 100 1000] [--seconds 20]

On an extra RabbitMQ node with RabbitMQ's defaults (deploy/rabbitmq-node.sh, index 5),
N queues are declared with qpid.flow_stop_count=1 and given 2 messages each, so every one
is flow stopped: all N are hot. For each N a real flow-sidecar process runs twice over the
same queues, and over `--seconds` we read the CPU time (user + system, from /proc) of the
broker's Erlang VM and of the sidecar process:

- baseline: `--no-live-depth` (statistics polls only, every second);
- live: the defaults (`--live-interval 0.05`, `--live-budget 1000`); the passive declares
  per second come from the sidecar's `flow_sidecar_live_samples_total`.

CPU time does not depend on what else runs on the machine the way wall-clock figures do;
the extra cost is live minus baseline, in the same run, per 1,000 declares per second.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def samples_total(sidecar: SidecarProcess) -> float:
    for line in sidecar.get("/metrics").text.splitlines():
        if line.startswith("flow_sidecar_live_samples_total "):
            return float(line.split()[1])
    return 0.0


def measure(node: ExtraNode, amqp: str, count: int, seconds: float,
            *flags: str) -> tuple[float, float, float]:
    """(broker CPU share, sidecar CPU share, declares per second) over `seconds`."""
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-live-cost-")),
                             "--management-url", node.management_url, "--amqp-url", amqp,
                             "--poll-interval", "1.0", *flags).start()
    try:
        eventually(lambda: sidecar.get("/healthz").json()["poller"]["queues"] >= count,
                   timeout=60)
        time.sleep(3)  # every queue seen stopped, the hot set scanned
        assert sidecar.proc is not None
        broker0, ours0, calls0 = cpu_seconds(node.pid()), cpu_seconds(sidecar.proc.pid), \
            samples_total(sidecar)
        started = time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - started
        broker = (cpu_seconds(node.pid()) - broker0) / took
        ours = (cpu_seconds(sidecar.proc.pid) - ours0) / took
        return broker, ours, (samples_total(sidecar) - calls0) / took
    finally:
        sidecar.stop()


def with_hot_queues(node: ExtraNode, count: int, seconds: float) -> tuple[
        int, tuple[float, float, float], tuple[float, float, float]]:
    """`count` flow-stopped queues, measured without and with live depth; then deleted."""
    names = [f"bench-cost-{uuid.uuid4().hex[:6]}-{i:04d}" for i in range(count)]
    with pika.BlockingConnection(pika.URLParameters(node.amqp_url)) as connection:
        channel = connection.channel()
        for name in names:
            channel.queue_declare(name, arguments={"qpid.flow_stop_count": 1})
            channel.basic_publish("", name, b"x")
            channel.basic_publish("", name, b"x")
        try:
            base = measure(node, node.amqp_url, count, seconds, "--no-live-depth")
            return count, base, measure(node, node.amqp_url, count, seconds)
        finally:
            for name in names:
                channel.queue_delete(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    node = ExtraNode("flowlive", 5).start()
    rows = [with_hot_queues(node, count, args.seconds) for count in args.queues]
    print(f"live depth cost, {args.seconds:.0f} s per measurement, every queue hot "
          "(flow stopped), default --live-interval 0.05 and --live-budget 1000:")
    print(f"  {'hot queues':>10}  {'declares/s':>10}  {'broker CPU':>22}  {'sidecar CPU':>22}")
    for count, base, live in rows:
        per_k = 1000 / live[2] if live[2] else 0.0
        print(f"  {count:>10}  {live[2]:>10.0f}  {live[0]:7.1%} vs {base[0]:6.1%} base  "
              f"{live[1]:7.1%} vs {base[1]:6.1%} base")
        print(f"  {'':>10}  {'':>10}  +{(live[0] - base[0]) * per_k:6.1%} of a core per "
              f"1,000 declares/s (broker), +{(live[1] - base[1]) * per_k:6.1%} (sidecar)")


if __name__ == "__main__":
    main()
