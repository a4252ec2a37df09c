"""What a takeover of a vhost's credit costs with replicas: seconds without a grant, with
the credit record's rule and with the rule before it, in the same run.

    .venv/bin/python bench/grant_takeover.py [--rounds 1] [--baseline-ref a42046b]

Two replicas (`--shared-state broker`, otherwise the defaults: `--poll-interval 1`,
`--request-timeout 5`, `--grant-lease-max 30`; `--broker-stats-lag 3` for the node's 1 s
statistics) on an extra RabbitMQ node (`deploy/rabbitmq-node.sh`, index 8), a queue with
`qpid.flow_stop_count` 1,000. A producer asks the replica that is not the vhost's owner
(so its asks are forwarded, as a producer's usually are), with `wait` 1 s, again and again,
until the vhost's new owner grants (a grant id starts with its maker's id; grants the
former owner still made meanwhile are given back at once); the figure is the seconds from
the event to that grant:

- `fresh start`: both replicas started at once; from both knowing the queue;
- `owner joins`: one replica runs and grants; a second starts whose URL makes it the
  vhost's owner (a rolling deploy's new pod); from its `/readyz`. The producer asks the
  first replica throughout, which grants until it sees the newcomer, then forwards;
- `owner stops`: the owner granted 100, the producer sent them and gave the grant back a
  second before the owner is stopped (SIGTERM); from the stop (it counts as gone once its
  heartbeat is `3 × poll + request timeout` old, 8 s);
- `kill -9, idle`: the same with `kill -9`;
- `kill -9, held`: the owner is killed while a producer holds 500 (a 3 s lease) and sends
  them 2.5 s into it; the survivor's grants are sent too: the peak must stay at the stop.

The baseline is flow-sidecar as of `--baseline-ref` (the last commit whose new owner waited
`3 × poll + request timeout + --grant-lease-max + --broker-stats-lag` after every change of
members), exported with `git archive` and run from that tree. Each scenario starts from an
empty shared state (the `flow-sidecar.*` global parameters deleted).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sidecar.cluster.grant_owners import owner_of, replica_id  # noqa: E402
from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

STOP = 1_000
STATS_CONF = [line for line in (ROOT / "deploy" / "rabbitmq.conf").read_text().splitlines()
              if line.startswith(("collect_statistics_interval", "management.sample"))]
SCENARIOS = ("fresh start", "owner joins", "owner stops", "kill -9, idle", "kill -9, held")


class Bench:
    """Replicas of one version on the bench's node; one scenario at a time."""

    def __init__(self, node: ExtraNode, program: list[str] | None) -> None:
        self.node = node
        self.program = program
        self.amqp = f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/%2F"
        self.made: list[SidecarProcess] = []

    def replica(self) -> SidecarProcess:
        proc = SidecarProcess(
            Path(tempfile.mkdtemp(prefix="bench-takeover-")), "--shared-state", "broker",
            "--management-url", self.node.management_url, "--amqp-url", self.amqp,
            "--broker-stats-lag", "3", command=self.program)
        self.made.append(proc)
        return proc

    def owning(self, other: SidecarProcess | None = None) -> SidecarProcess:
        """A replica that owns vhost '/' beside `other` (a port whose id ranks first)."""
        while True:
            proc = self.replica()
            members = {replica_id(proc.url): 0} | (
                {} if other is None else {replica_id(other.url): 0})
            if owner_of("/", members) == replica_id(proc.url):
                return proc
            self.made.remove(proc)

    def clean(self) -> None:
        for proc in self.made:
            proc.stop()
        self.made.clear()
        auth = ("guest", "guest")
        api = f"{self.node.management_url}/api/global-parameters"
        for p in requests.get(api, auth=auth, timeout=10).json():
            if p["name"].startswith("flow-sidecar."):
                requests.delete(f"{api}/{quote(p['name'], safe='')}", auth=auth, timeout=10)

    def queue(self, name: str) -> str:
        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as connection:
            channel = connection.channel()
            channel.queue_delete(name)
            channel.queue_declare(name, arguments={"qpid.flow_stop_count": STOP,
                                                   "qpid.flow_stop_size": 0})
        return name

    def publish(self, name: str, messages: int) -> None:
        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as connection:
            channel = connection.channel()
            channel.confirm_delivery()
            for _ in range(messages):
                channel.basic_publish("", name, b"x")

    def depth(self, name: str) -> int:
        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as connection:
            declared = connection.channel().queue_declare(name, passive=True)
            return int(declared.method.message_count)


def ask(replica: SidecarProcess, queue: str, messages: int = STOP,
        lease: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": messages, "wait": 1.0}
    if lease is not None:
        body["lease"] = lease
    answer: dict[str, Any] = requests.post(
        f"{replica.url}/grants/%2F/{quote(queue, safe='')}", json=body,
        headers={"X-Producer-Id": "bench"}, timeout=20).json()
    return answer


def until_granted(replica: SidecarProcess, queue: str, since: float, messages: int = STOP,
                  maker: SidecarProcess | None = None) -> tuple[float, dict[str, Any]]:
    """(seconds from `since` to the first grant `replica` answers that `maker` made (any
    without), that answer); others are given back at once, unused."""
    while True:
        answer = ask(replica, queue, messages)
        grant_id = answer["grantId"] or ""
        if grant_id and (maker is None or grant_id.startswith(replica_id(maker.url) + ".")):
            return time.monotonic() - since, answer
        if grant_id:
            give_back(replica, answer, 0)
        if time.monotonic() - since > 180:
            raise AssertionError(f"nothing granted in 180 s: {answer}")


def give_back(replica: SidecarProcess, answer: dict[str, Any], used: int) -> None:
    requests.post(f"{replica.url}/grants/release", headers={"X-Producer-Id": "bench"},
                  json={"grants": [{"grantId": answer["grantId"], "usedMessages": used,
                                    "confirmed": True}]}, timeout=10)


def known(replicas: list[SidecarProcess], queue: str) -> None:
    path = f"/flow/%2F/{quote(queue, safe='')}"
    for r in replicas:
        eventually(lambda r=r: r.get(path).json().get("depth") is not None, timeout=60)


def pair(bench: Bench) -> tuple[SidecarProcess, SidecarProcess]:
    """(owner, other), started at once and ready."""
    other = bench.replica()
    owner = bench.owning(other)
    for r in (owner, other):
        r.start(wait_ready=False)
    for r in (owner, other):
        eventually(lambda r=r: r.get("/readyz").ok, timeout=60)
    return owner, other


def fresh_start(bench: Bench, queue: str) -> tuple[float, int]:
    owner, other = pair(bench)
    known([owner, other], queue)
    return until_granted(other, queue, time.monotonic())[0], bench.depth(queue)


def owner_joins(bench: Bench, queue: str) -> tuple[float, int]:
    first = bench.replica().start()
    known([first], queue)
    until_granted(first, queue, time.monotonic(), messages=1)
    joining = bench.owning(first).start()
    return until_granted(first, queue, time.monotonic(), maker=joining)[0], bench.depth(queue)


def owner_gone(bench: Bench, queue: str, end: Callable[[SidecarProcess], None]
               ) -> tuple[float, int]:
    owner, other = pair(bench)
    known([owner, other], queue)
    _, held = until_granted(owner, queue, time.monotonic(), messages=100)
    bench.publish(queue, 100)
    give_back(owner, held, 100)
    time.sleep(1.0)
    end(owner)
    waited, answer = until_granted(other, queue, time.monotonic(), maker=other)
    bench.publish(queue, answer["messages"])
    return waited, bench.depth(queue)


def killed_holding(bench: Bench, queue: str) -> tuple[float, int]:
    owner, other = pair(bench)
    known([owner, other], queue)
    until_granted(owner, queue, time.monotonic(), messages=500)  # a 3 s lease
    granted = time.monotonic()
    owner.kill()
    killed = time.monotonic()
    sent = False
    while True:
        if not sent and time.monotonic() - granted > 2.5:  # spent late in its lease
            bench.publish(queue, 500)
            sent = True
        answer = ask(other, queue)
        if (answer["grantId"] or "").startswith(replica_id(other.url) + "."):
            bench.publish(queue, answer["messages"])
            return time.monotonic() - killed, bench.depth(queue)


RUNS: dict[str, Callable[[Bench, str], tuple[float, int]]] = {
    "fresh start": fresh_start, "owner joins": owner_joins,
    "owner stops": lambda bench, queue: owner_gone(bench, queue, SidecarProcess.stop),
    "kill -9, idle": lambda bench, queue: owner_gone(bench, queue, SidecarProcess.kill),
    "kill -9, held": killed_holding}


def baseline_program(ref: str) -> list[str]:
    """A command running flow-sidecar as of `ref`, from a tree exported with git archive."""
    tree = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    launcher = tree / "run_baseline.py"  # its directory comes first on sys.path
    launcher.write_text("from api.main import main\nmain()\n")
    return [sys.executable, str(launcher)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline-ref", default="a42046b",
                        help="the flow-sidecar version to compare with (a git ref)")
    parser.add_argument("--keep-node", action="store_true", help="leave the extra node up")
    args = parser.parse_args()
    node = ExtraNode("flowtakeover", 8, *STATS_CONF).start()
    rules = {"record": Bench(node, None), "before": Bench(node, baseline_program(
        args.baseline_ref))}
    seconds: dict[tuple[str, str], list[float]] = {}
    try:
        for r in range(args.rounds):
            for scenario in SCENARIOS:
                for rule, bench in rules.items():
                    bench.clean()  # what a run cut short left behind, too
                    queue = bench.queue(f"bench-takeover-{r}")
                    try:
                        waited, peak = RUNS[scenario](bench, queue)
                    finally:
                        bench.clean()
                    seconds.setdefault((scenario, rule), []).append(waited)
                    print(f"round {r + 1} {scenario:14} {rule:7}: first grant after "
                          f"{waited:5.1f} s; peak {peak:,} (stop {STOP:,})", flush=True)
    finally:
        if not args.keep_node:
            node.stop()
    print(f"\nseconds without credit, medians of {args.rounds} round(s) [min-max]:")
    for scenario in SCENARIOS:
        new, old = seconds[(scenario, "record")], seconds[(scenario, "before")]
        print(f"  {scenario:14}: {statistics.median(new):5.1f} s [{min(new):.1f}-{max(new):.1f}]"
              f" against {statistics.median(old):5.1f} s [{min(old):.1f}-{max(old):.1f}] = "
              f"{statistics.median(new) / statistics.median(old):.2f} x the rule before")


if __name__ == "__main__":
    main()
