"""The peak depth of a queue while the sidecar restarts, with the publishers' defaults
against the old behaviour (fail open at once) in the same run.

    .venv/bin/python bench/outage_overshoot.py [--rounds 3] [--down 3]

Four `FlowControlledPublisher`s of capacity 50 (threads of this process, grants "auto")
send 100-byte messages as fast as they can to a queue with `qpid.flow_stop_count` 1,000
and no consumer. Once it holds 500 the sidecar is killed (-9), or stopped (SIGTERM), for
`--down` seconds and started again on its data directory; the producers go on until it
answers again and 4 s more (start-up takes longer on a loaded machine: it counts in the
outage, and each run says when the sidecar answered again). The depth is read exactly (a
passive declare) every 20 ms.
Modes, in turn in each round:

- `defaults`: obey what the sidecar last said, fail open after the grace period (10 s);
- `send`: `on_unreachable="send"`, the old default: send unchecked while it is away.

The bound is the stop + the producers' summed windows (1,200). Then, once, the sidecar gone
for good: when the queue first passes the bound (the grace period, then failing open).

On an extra RabbitMQ node (`deploy/rabbitmq-node.sh`, index 31) with deploy/rabbitmq.conf's
1 s statistics, so that the main broker the tests share is not disturbed.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.extra_node import ExtraNode  # noqa: E402
from tests.utils.outage_run import outage_peak  # noqa: E402
from tests.utils.sidecar_process import SidecarProcess, eventually  # noqa: E402

STATS_CONF = [line for line in (ROOT / "deploy" / "rabbitmq.conf").read_text().splitlines()
              if line.startswith(("collect_statistics_interval", "management.sample"))]
BOUND = 1_000 + 4 * 50
MODES = {"defaults": {}, "send": {"on_unreachable": "send"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down", type=float, default=3.0)
    parser.add_argument("--keep-node", action="store_true", help="leave the extra node up")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the producers' Qpid lines: thousands
    node = ExtraNode("flowoutage", 31, *STATS_CONF).start()
    sidecar = SidecarProcess(Path(tempfile.mkdtemp(prefix="bench-outage-")),
                             "--management-url", node.management_url, "--broker-stats-lag",
                             "3", "--amqp-url", node.amqp_url, "--poll-interval", "0.2")
    peaks: dict[tuple[str, str], list[int]] = {}
    outages: dict[str, list[float]] = {}
    try:
        sidecar.start(wait_ready=False)  # a loaded machine may take longer than start()'s 20 s
        eventually(lambda: sidecar.get("/readyz").ok, timeout=120)
        for r in range(args.rounds):
            for how in ("kill", "term"):
                for mode in (MODES if r % 2 == 0 else reversed(MODES)):
                    seen = outage_peak(node.amqp_url, sidecar, f"outage-{uuid.uuid4().hex[:8]}",
                                       how=how, down=args.down,  # type: ignore[arg-type]
                                       **MODES[mode])  # type: ignore[arg-type]
                    peaks.setdefault((how, mode), []).append(seen.peak)
                    outages.setdefault(how, []).append(seen.back_after or 0.0)
                    print(f"round {r + 1} {how:4} {mode:8} peak {seen.peak:6d} (sent "
                          f"{seen.sent}; the sidecar answered again {seen.back_after:.1f} s "
                          "after it went)", flush=True)
        gone = outage_peak(node.amqp_url, sidecar, f"outage-{uuid.uuid4().hex[:8]}",
                           how="gone", down=14.0, after=0.0)
        print(f"\nbound (stop + 4 x 50): {BOUND}; median peak over {args.rounds} rounds, "
              f"sidecar away {args.down:g} s")
        for how in ("kill", "term"):
            ours = statistics.median(peaks[(how, "defaults")])
            old = statistics.median(peaks[(how, "send")])
            print(f"  {'kill -9' if how == 'kill' else 'SIGTERM':8} defaults {ours:7.0f} "
                  f"(max {max(peaks[(how, 'defaults')])}, {ours / BOUND:.2f} x the bound)   "
                  f"on_unreachable=send {old:7.0f} ({old / BOUND:.1f} x the bound, "
                  f"{old / ours:.0f} x defaults)   sidecar back after "
                  f"{statistics.median(outages[how]):.1f} s")
        print(f"  gone for good: past the bound {gone.past_bound_after:.1f} s after it went "
              f"(grace 10 s), peak within the grace period "
              f"{max((d for t, d in gone.depths if t < 10), default=0)}")
    finally:
        sidecar.stop()
        if not args.keep_node:
            node.stop()


if __name__ == "__main__":
    main()
