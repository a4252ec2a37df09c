"""flow-config's broker-wide commands: vhost quotas, vhost default thresholds, alarms.

    flow-config vhost-quota --overfull-size 50000000 --underfull-size 45000000 [--vhost V]
    flow-config vhost-quota [--vhost V]                    (show; --reset removes it)
    flow-config vhost-defaults --capacity 10485760 --flow-resume-capacity 8388608
    flow-config vhost-defaults --flow-stop-count 900 ...   (qpid-config's four options)
    flow-config vhost-defaults --warning-horizon 60        (and --warning-fraction)
    flow-config vhosts                                     (every vhost, then any alarm)

A quota is Broker-J's store overfull/underfull size (`--store-overfull-size` and
`--store-underfull-size` are accepted too), summed over the vhost's queues; optionally
in messages as well. Given options replace what is stored, as `add` does for a queue.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from flow_sidecar_client.api import FlowApi

COMMANDS = ("vhost-quota", "vhost-defaults", "vhosts")
QUOTA_OPTIONS = {"overfull_size": "overfullSize", "underfull_size": "underfullSize",
                 "overfull_messages": "overfullMessages",
                 "underfull_messages": "underfullMessages"}
BROKER_J = {"overfull_size": "--store-overfull-size", "underfull_size": "--store-underfull-size",
            "flow_stop_size": "--capacity", "flow_resume_size": "--flow-resume-capacity"}


def add_commands(commands: Any, common: argparse.ArgumentParser,
                 flow_options: dict[str, str]) -> None:
    """The broker-wide subcommands, beside the queue ones."""
    for name, options, text in (
            ("vhost-quota", QUOTA_OPTIONS, "show or set a vhost's store quota (MST-1008)"),
            ("vhost-defaults", flow_options,
             "show or set the default thresholds of a vhost's queues")):
        sub = commands.add_parser(name, parents=[common], help=text)
        for option in options:
            flags = ["--" + option.replace("_", "-")] + (
                [BROKER_J[option]] if option in BROKER_J else [])
            sub.add_argument(*flags, dest=option, **value_type(option))
        sub.add_argument("--reset", action="store_true", help="forget what is stored")
    commands.add_parser("vhosts", parents=[common],
                        help="every vhost's total, quota and state, and the broker's alarms")


def value_type(option: str) -> dict[str, Any]:
    """argparse's type and metavar of a setting's option: the warning ones take decimals."""
    if option.startswith("warning_"):
        return {"type": float, "metavar": "SECONDS" if option.endswith("horizon") else "SHARE"}
    return {"type": int, "metavar": "N"}


def run(api: FlowApi, args: argparse.Namespace, parser: argparse.ArgumentParser,
        flow_options: dict[str, str]) -> tuple[Any, str]:
    """Execute one broker-wide command: (JSON for --json, text for people)."""
    if args.command == "vhosts":
        views, alarms = api.vhosts(), api.alarms()
        return {"vhosts": views, "alarms": alarms}, _table(views, alarms)
    kind, options = (("quota", QUOTA_OPTIONS) if args.command == "vhost-quota"
                     else ("defaults", flow_options))
    vhost = args.vhost or "/"
    given = {key: getattr(args, opt) for opt, key in options.items()
             if getattr(args, opt) is not None}
    if args.reset and given:
        parser.error("--reset takes no other option")
    if args.reset:
        view = api.delete_vhost(kind, vhost)
    elif given:
        view = api.put_vhost(kind, vhost, given)
    else:
        view = api.vhost(vhost)
    return view, _table([view], None)


def number(value: Any) -> str:
    """A table cell: "-" for nothing, integers with thousands separators."""
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def aligned(rows: Sequence[Sequence[Any]]) -> list[str]:
    """`rows` (the header first) as lines of left-aligned columns two spaces apart."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


_n = number  # short, for the table rows


def _table(views: list[dict[str, Any]], alarms: dict[str, Any] | None) -> str:
    header = ("vhost", "queues", "messages", "bytes", "quota over/under bytes",
              "quota over/under msgs", "state", "overfull#", "queue defaults")
    rows = [header]
    for v in views:
        depth, quota = v.get("depth") or {}, v.get("quota") or {}
        defaults = {k.removeprefix("qpid.flow_"): n
                    for k, n in (v.get("queueDefaults") or {}).items() if n is not None}
        rows.append((
            v["vhost"], _n(v["queues"]), _n(depth.get("messages")), _n(depth.get("bytes")),
            f"{_n(quota.get('overfullSize'))}/{_n(quota.get('underfullSize'))}",
            f"{_n(quota.get('overfullMessages'))}/{_n(quota.get('underfullMessages'))}",
            "OVERFULL" if v["storeOverfull"] else "ok", _n(v["storeOverfullCount"]),
            ", ".join(f"{k}={n:,}" for k, n in defaults.items()) or "-"))
    lines = aligned(rows)
    lines += [f"stopped by: {r['detail']}" for v in views[:1] if alarms is None
              for r in v["flowStopReasons"]]
    lines += [f"ALARM: {a['resource']} alarm on node {a['node']} since {a['since']}: every "
              "queue is flow stopped" for a in (alarms or {}).get("alarms", [])]
    return "\n".join(lines)
