"""What live depth costs the broker and the sidecar, with 100 and 1,000 hot queues.

    .venv/bin/python bench/live_cost.py [--queues 100 1000] [--seconds 20]
        [--live-budget B ...] [--management-url URL --amqp-url URL --user U --password P]
        [--sidecar-url URL]

On an extra RabbitMQ node with RabbitMQ's defaults (deploy/rabbitmq-node.sh, index 5), or
the broker the options name (on this machine, for its CPU to be read),
N queues are declared with qpid.flow_stop_count=1 (and no size threshold) and given 2
messages each, so every one is flow stopped, and a live sample could release it: all N
are hot. For each N a real flow-sidecar process runs twice over the
same queues, and over `--seconds` we read the CPU time (user + system, from /proc) of the
broker's Erlang VM and of the sidecar process:

- baseline: `--no-live-depth` (statistics polls only, every second);
- live: the defaults (`--live-interval 0.05`), at the default `--live-budget` or at each
  of `--live-budget`'s values; the passive declares per second come from the sidecar's
  `flow_sidecar_live_samples_total`, and how often each hot queue was read from its
  `/healthz` (`live.hotReadGapSeconds`, the longest wait between two reads of one queue).

CPU time does not depend on what else runs on the machine the way wall-clock figures do;
the extra cost is live minus baseline, in the same run, per 1,000 declares per second.
With `--sidecar-url` the live figures are that sidecar's (it must watch the same broker
with live depth on) and the baseline is the broker with no sidecar of the bench's at all.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pika

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.bench_targets import (  # noqa: E402
    ProcessCpu,
    add_target_options,
    amqp_url,
    broker_pid,
    sidecar_for,
)
from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402


def samples_total(sidecar: SidecarProcess) -> float:
    for line in sidecar.get("/metrics").text.splitlines():
        if line.startswith("flow_sidecar_live_samples_total "):
            return float(line.split()[1])
    return 0.0


Figures = tuple[float, float | None, float, float | None]


def measure(args: argparse.Namespace, broker: ProcessCpu, count: int, seconds: float,
            *flags: str) -> Figures:
    """(broker CPU share, sidecar CPU share, declares per second, the longest wait between
    two reads of a hot queue) over `seconds`; with `flags` ("none",), the broker alone (no
    sidecar of the bench's)."""
    sidecar: SidecarProcess | None = None
    if flags != ("none",):
        sidecar = sidecar_for(args, "bench-live-cost-", "--poll-interval", "1.0", *flags)
    try:
        if sidecar is not None:
            eventually(lambda: sidecar.get("/healthz").json()["poller"]["queues"] >= count,
                       timeout=60)
            time.sleep(3)  # every queue seen stopped, the hot set scanned
        ours = ProcessCpu(sidecar.proc.pid) if sidecar and sidecar.proc else None
        broker0, ours0 = broker.seconds(), ours.seconds() if ours else 0.0
        calls0 = samples_total(sidecar) if sidecar else 0.0
        started = time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - started
        share = (broker.seconds() - broker0) / took
        own = (ours.seconds() - ours0) / took if ours else None
        calls = (samples_total(sidecar) - calls0) / took if sidecar else 0.0
        gap = sidecar.get("/healthz").json()["live"].get("hotReadGapSeconds") if sidecar \
            else None
        return share, own, calls, gap
    finally:
        if sidecar is not None:
            sidecar.stop()


def with_hot_queues(args: argparse.Namespace, broker: ProcessCpu, count: int,
                    seconds: float) -> list[tuple[str, Figures, Figures]]:
    """`count` flow-stopped queues, measured without and with live depth (at each budget
    asked for); then deleted. Rows of (budget, baseline, live)."""
    names = [f"bench-cost-{uuid.uuid4().hex[:6]}-{i:04d}" for i in range(count)]
    with pika.BlockingConnection(pika.URLParameters(amqp_url(args))) as connection:
        channel = connection.channel()
        for name in names:
            # count only: a stopped queue whose size is watched is not read live (no live
            # figure could release it), and these must all stay hot
            channel.queue_declare(name, arguments={"qpid.flow_stop_count": 1,
                                                   "qpid.flow_stop_size": 0})
            channel.basic_publish("", name, b"x")
            channel.basic_publish("", name, b"x")
        try:
            base = measure(args, broker, count, seconds,
                           *(("none",) if args.sidecar_url else ("--no-live-depth",)))
            if args.sidecar_url or not args.live_budget:
                return [("default", base, measure(args, broker, count, seconds))]
            return [(f"{budget:g}", base, measure(args, broker, count, seconds,
                                                  "--live-budget", str(budget)))
                    for budget in args.live_budget]
        finally:
            for name in names:
                channel.queue_delete(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--live-budget", type=float, nargs="+", default=[], help=(
        "measure live depth at each of these budgets (default: the sidecar's default)"))
    add_target_options(parser, management="", amqp="")  # default: the flowlive node
    args = parser.parse_args()
    if not args.management_url:
        node = ExtraNode("flowlive", 5).start()
        args.management_url, args.amqp_url = node.management_url, node.amqp_url
    pid = broker_pid(urlsplit(args.amqp_url).port or 5672)
    if pid is None:
        raise SystemExit("the broker is no process of this machine: its CPU cannot be read")
    broker = ProcessCpu(pid)
    rows = {count: with_hot_queues(args, broker, count, args.seconds)
            for count in args.queues}
    print(f"live depth cost, {args.seconds:.0f} s per measurement, every queue hot "
          "(flow stopped), default --live-interval 0.05:")
    print(f"  {'hot queues':>10}  {'budget':>7}  {'declares/s':>10}  {'longest wait':>12}  "
          f"{'broker CPU':>22}  {'sidecar CPU':>22}")
    for count, measured in rows.items():
        for budget, base, live in measured:
            per_k = 1000 / live[2] if live[2] else 0.0
            gap = "n/a" if live[3] is None else f"{live[3] * 1000:.0f} ms"
            head = f"  {count:>10}  {budget:>7}  {live[2]:>10.0f}  {gap:>12}  "
            if live[1] is None or base[1] is None:  # an existing sidecar: not our CPU
                print(f"{head}{live[0]:7.1%} vs {base[0]:6.1%} base")
                print(f"  {'':>46}+{(live[0] - base[0]) * per_k:6.1%} of a core per 1,000 "
                      "declares/s (broker; base: no sidecar of the bench's)")
                continue
            print(f"{head}{live[0]:7.1%} vs {base[0]:6.1%} base  "
                  f"{live[1]:7.1%} vs {base[1]:6.1%} base")
            print(f"  {'':>46}+{(live[0] - base[0]) * per_k:6.1%} of a core per 1,000 "
                  f"declares/s (broker), +{(live[1] - base[1]) * per_k:6.1%} (sidecar)")


if __name__ == "__main__":
    main()
