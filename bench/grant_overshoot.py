"""Overshoot above the stop threshold with credit grants, with long-poll alone, and with no
flow control, against the producers' summed capacity; and what grants cost the send path.

    .venv/bin/python bench/grant_overshoot.py [--rounds 3] [--capacity 50] [--burst 4]

Four producer processes, each a `FlowControlledPublisher` with `--capacity` unconfirmed
messages, send 100-byte messages as fast as they can to one queue with
`qpid.flow_stop_count` 1,000 and no consumer, until a `publish()` is held for 2 s (flow
control) or `--burst` seconds have passed. The peak is the queue's depth once all are
done (exact: a passive declare), so peak - stop is the overshoot; Qpid's own bound is the
summed capacity. Modes, in the same run and in turn:

- `grants`: the library's default, spending credit grants;
- `longpoll`: `grants="off"`, blocking on the long-polled flow state as before grants;
- `none`: no sidecar to ask (the baseline: what the burst sends unchecked).

Then, through a drained queue: the same burst for 6 s with a consumer taking messages as
fast as it can (auto-ack); messages/s and the most the queue held (sampled every 20 ms):
what grants cost near the stop, where spent credit stays counted for the statistics lag.

Then the bound under faults (grants only, `--rounds` times): the same burst with the
producers spread over two replicas (`--shared-state broker`; one owns the vhost's credit,
the other forwards), and with the sidecar killed (-9) one second into the burst and
started again on its data directory (producers with `grants="required"`, which hold their
messages while the sidecar cannot be reached instead of sending unchecked, and keep
trying until the burst ends: 10 s longer than the others, to outlast the restart).

Then the send-path cost: the same four producers with a stop of 10,000,000 (flow control
never bites) send `--messages` each; messages/s with grants and with long-poll alone,
as ratios to `none` in the same round (the machine's load moves between rounds).

All of it on an extra RabbitMQ node with deploy/rabbitmq.conf's 1 s statistics
(`deploy/rabbitmq-node.sh`, index 6; the sidecar with `--broker-stats-lag 3`, as the tests),
then on one with RabbitMQ's default 5 s statistics (index 7; the sidecar's default lag of
10 s), so the load does not disturb the main broker (`--statistics` picks one). Each
sidecar reads live depth from its node's own AMQP port (`--amqp-url`): without it, it
would read the main node's port 5672, find none of the bench's queues there, and no
confirmed release could be settled before the statistics' lag.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flow_sidecar_client.publisher import FlowControlledPublisher, FlowControlTimeout  # noqa: E402
from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port  # noqa: E402

PRODUCERS, STOP, HELD_MS = 4, 1_000, 2_000
STATS_CONF = [line for line in (ROOT / "deploy" / "rabbitmq.conf").read_text().splitlines()
              if line.startswith(("collect_statistics_interval", "management.sample"))]
BODY = b"m" * 100


def produce(mode: str, queue: str, amqp: str, sidecar: str, capacity: int, burst: float,
            limit: int, persist: bool, go: Any, results: Any) -> None:
    """One producer process: send until held (unless `persist`), `burst` seconds pass or
    `limit` are sent."""
    publisher = FlowControlledPublisher(
        queue, capacity=capacity, amqp=amqp, flow_control_wait_failure=HELD_MS,
        sidecar_url=sidecar if mode != "none" else f"http://127.0.0.1:{free_port()}",
        grants={"grants": "auto", "required": "required"}.get(mode, "off"))
    go.wait()
    sent, started = 0, time.time()
    last = started
    while sent < limit and last - started < burst:
        try:
            publisher.publish(BODY)
            sent += 1
        except FlowControlTimeout:
            if not persist:
                break
        last = time.time()
    publisher.close()
    results.put((sent, started, last))


def consume(queue: str, amqp: str, done: Any) -> None:
    """A consumer process taking messages as fast as it can (auto-ack) until `done`."""
    connection = pika.BlockingConnection(pika.URLParameters(amqp))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=1_000)
    channel.basic_consume(queue, lambda *_: None, auto_ack=True)
    while not done.is_set():
        connection.process_data_events(0.1)
    connection.close()


def run(mode: str, queue: str, node: ExtraNode, sidecar: SidecarProcess, capacity: int,
        burst: float, limit: int, stop: int, drain: bool = False,
        others: tuple[SidecarProcess, ...] = (), fault: bool = False) -> tuple[int, float]:
    """(peak depth, combined messages/s while sending) of one burst of all producers;
    with `drain`, a consumer takes messages meanwhile and the peak is the most the queue
    held in samples every 20 ms; producers spread over `sidecar` and `others`; `fault`:
    `sidecar` is killed (-9) a second into the burst and started again (producers then
    keep trying until the burst ends)."""
    amqp = f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/%2F"
    connection = pika.BlockingConnection(pika.URLParameters(amqp))
    channel = connection.channel()
    channel.queue_delete(queue)  # a run cut short (--keep-node) may have left it full
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": stop,
                                            "qpid.flow_resume_count": stop // 2})
    try:
        # a queue in use has statistics: until its first, no live figure bounds its
        # unacknowledged messages, so no confirmed release settles (up to 5 s at defaults)
        eventually(lambda: requests.get(f"{node.management_url}/api/queues/%2F/{queue}",
                                        auth=("guest", "guest"), timeout=5).json().get(
            "messages_unacknowledged") is not None, timeout=30)
        eventually(lambda: sidecar.get(f"/flow/%2F/{queue}").json().get("depth") is not None,
                   timeout=30)
        ctx = mp.get_context("spawn")
        go, results = ctx.Event(), ctx.Queue()
        urls = [s.url for s in (sidecar, *others)]
        procs = [ctx.Process(target=produce, args=(mode, queue, amqp, urls[i % len(urls)],
                                                   capacity, burst, limit, drain or fault,
                                                   go, results))
                 for i in range(PRODUCERS)]
        finished = ctx.Event()
        if drain:
            procs.append(ctx.Process(target=consume, args=(queue, amqp, finished)))
        for p in procs:
            p.start()
        time.sleep(3)  # connections open, first flow answers in
        if drain:  # listed, as a consumer in use is: until then no live figure is a bound
            eventually(lambda: requests.get(
                f"{node.management_url}/api/queues/%2F/{queue}", auth=("guest", "guest"),
                timeout=5).json().get("consumers") == 1, timeout=30)
        go.set()
        if fault:
            time.sleep(1.0)
            sidecar.kill()
            sidecar.start()
        seen = [0]
        while results.qsize() < PRODUCERS and drain:
            seen.append(channel.queue_declare(queue, passive=True).method.message_count)
            time.sleep(0.02)
        done = [results.get(timeout=burst + 120) for _ in range(PRODUCERS)]
        finished.set()
        for p in procs:
            p.join(30)
        sent = sum(d[0] for d in done)
        seconds = max(d[2] for d in done) - min(d[1] for d in done)
        peak = channel.queue_declare(queue, passive=True).method.message_count
        assert drain or peak == sent, (peak, sent)
        return max(peak, *seen), sent / max(seconds, 1e-6)
    finally:
        channel.queue_delete(queue)
        connection.close()


#: The nodes a run measures on: (name, extra-node index, its config lines, the sidecar's
#: --broker-stats-lag). deploy/rabbitmq.conf's 1 s statistics with the lag the test suite
#: uses for them; RabbitMQ's default 5 s statistics with the sidecar's default lag.
NODES = {"project": ("flowgrants", 6, STATS_CONF, "3"),
         "default": ("flowgrants5", 7, ["collect_statistics_interval = 5000"], "10")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--capacity", type=int, default=50)
    parser.add_argument("--burst", type=float, default=4.0)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--statistics", choices=[*NODES, "both"], default="both",
                        help="the node(s): deploy/rabbitmq.conf's 1 s statistics "
                             "(project), RabbitMQ's default 5 s (default), or both in turn")
    parser.add_argument("--keep-node", action="store_true", help="leave the extra node up")
    args = parser.parse_args()
    for name in (NODES if args.statistics == "both" else [args.statistics]):
        node_name, index, conf, lag = NODES[name]
        node = ExtraNode(node_name, index, *conf).start()
        print(f"=== {name} statistics: {', '.join(line.replace(' ', '') for line in conf[:1])}"
              f" on {node.management_url}, --broker-stats-lag {lag} ===", flush=True)
        try:
            measure(node, lag, args)
        finally:
            if not args.keep_node:
                node.stop()


def measure(node: ExtraNode, lag: str, args: argparse.Namespace) -> None:
    """Every phase of the module docstring on `node`, `args.rounds` times, and the summary."""
    # the node's own AMQP port: live depth (and so confirmed releases) reads this node
    broker = ("--management-url", node.management_url, "--broker-stats-lag", lag,
              "--amqp-url", f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/%2F")
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-grants-")), *broker,
                             "--poll-interval", "0.2").start()
    replicas = [SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-replica-")), *broker,
                               "--poll-interval", "0.2", "--shared-state", "broker",
                               "--request-timeout", "1", "--grant-lease-max", "3").start()
                for _ in range(2)]
    modes = ("grants", "longpoll", "none")
    faults: dict[str, list[int]] = {"2 replicas": [], "kill -9 mid-burst": []}
    peaks: dict[str, list[int]] = {m: [] for m in modes}
    rates: dict[str, list[float]] = {m: [] for m in modes}
    speed: dict[str, list[float]] = {m: [] for m in modes}
    drained: dict[str, list[tuple[int, float]]] = {m: [] for m in modes}
    try:
        for r in range(args.rounds):
            # each phase runs the modes back to back, in an order that turns every round,
            # so that the figures compared were measured seconds apart, not minutes: on a
            # machine shared with other work the load drifts between phases
            order = modes[r % 3:] + modes[:r % 3]
            for mode in order:
                peak, rate = run(mode, f"bench-overshoot-{mode}-{r}", node, sidecar,
                                 args.capacity, args.burst, 10**9, STOP)
                peaks[mode].append(peak)
                rates[mode].append(rate)
            for mode in order:
                speed[mode].append(run(mode, f"bench-speed-{mode}-{r}", node, sidecar,
                                       args.capacity, 600, args.messages, 10_000_000)[1])
            for mode in order:
                drained[mode].append(run(mode, f"bench-drained-{mode}-{r}", node, sidecar,
                                         args.capacity, 6.0, 10**9, STOP, drain=True))
            for mode in modes:
                peak, rate, fast = peaks[mode][-1], rates[mode][-1], speed[mode][-1]
                print(f"round {r + 1} {mode:8}: peak {peak:6,} ({peak - STOP:+,} over stop) "
                      f"at {rate:6,.0f} msg/s; unchecked speed {fast:6,.0f} msg/s; drained: "
                      f"peak {drained[mode][-1][0]:,} at {drained[mode][-1][1]:,.0f} msg/s",
                      flush=True)
            faults["2 replicas"].append(run(
                "grants", f"bench-replicas-{r}", node, replicas[0], args.capacity,
                args.burst, 10**9, STOP, others=(replicas[1],))[0])
            faults["kill -9 mid-burst"].append(run(  # a burst that outlasts the restart
                "required", f"bench-kill-{r}", node, sidecar, args.capacity,
                args.burst + 10, 10**9, STOP, fault=True)[0])
            print(f"round {r + 1} faults: " + ", ".join(
                f"{name} peak - stop {peaks_[-1] - STOP:+,}" for name, peaks_ in faults.items()),
                flush=True)
    finally:
        sidecar.stop()
        for replica in replicas:
            replica.stop()
    capacity = PRODUCERS * args.capacity
    print(f"\n{PRODUCERS} producers, capacity {args.capacity} each (summed {capacity}), "
          f"stop {STOP:,}, {args.rounds} rounds, medians [min-max]:")
    for mode in modes:
        over = [p - STOP for p in peaks[mode]]
        print(f"  {mode:8}: peak - stop {statistics.median(over):+8,.0f} "
              f"[{min(over):+,} .. {max(over):+,}] = {statistics.median(over) / capacity:6.2f}"
              f" x summed capacity; burst {statistics.median(rates[mode]):6,.0f} msg/s")
    for name, seen in faults.items():
        over = [p - STOP for p in seen]
        print(f"  grants, {name}: peak - stop {statistics.median(over):+,.0f} "
              f"[{min(over):+,} .. {max(over):+,}] (summed capacity {capacity})")
    print(f"send path, {args.messages:,} messages per producer, no flow control biting "
          "(ratios to `none` of the same round):")
    for mode in modes:
        ratios = [s / n for s, n in zip(speed[mode], speed["none"], strict=True)]
        print(f"  {mode:8}: {statistics.median(speed[mode]):6,.0f} msg/s "
              f"[{min(speed[mode]):,.0f} .. {max(speed[mode]):,.0f}] = "
              f"{statistics.median(ratios):.2f} x none [{min(ratios):.2f} .. {max(ratios):.2f}]")
    print(f"through the queue with a consumer taking all it can, 6 s, stop {STOP:,}:")
    for mode in modes:
        over = [p - STOP for p, _ in drained[mode]]
        ratios = [m / n for (_, m), (_, n) in zip(drained[mode], drained["none"], strict=True)]
        print(f"  {mode:8}: {statistics.median(r for _, r in drained[mode]):6,.0f} msg/s "
              f"= {statistics.median(ratios):.2f} x none [{min(ratios):.2f} .. "
              f"{max(ratios):.2f}], peak - stop "
              f"{statistics.median(over):+,.0f} [{min(over):+,} .. {max(over):+,}]")


if __name__ == "__main__":
    main()
