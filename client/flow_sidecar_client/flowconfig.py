"""`flow-config`: qpid-config's flow options, against the sidecar's API.

    flow-config add orders --flow-stop-count 900 --flow-resume-count 500
    flow-config add queue orders --flow-stop-size 8192      (qpid-config's word order)
    flow-config set orders --flow-resume-count 400          (changes only the given keys)
    flow-config set orders --warning-horizon 60 --warning-fraction 0.8   (when it is warned)
    flow-config del orders
    flow-config list ['orders.*']
    flow-config show orders
    flow-config defaults [--stop-threshold 80 --resume-threshold 70 --queue-limit N | --reset]
    flow-config vhost-quota | vhost-defaults | vhosts      (broker-wide: flowconfig_vhosts)

`add` replaces a queue's stored settings with exactly the options given (like PUT); `set`
merges the given options into what is stored. Either refuses a resume whose dimension would
have no stored stop (`missing_stop`). Exit codes: 0 done, 1 refused by flow-config or the
sidecar (the message names the setting), 2 usage, 3 sidecar unreachable, 4 token refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from flow_sidecar_client import flowconfig_vhosts
from flow_sidecar_client.api import ApiError, FlowApi, stored_settings
from flow_sidecar_client.flowconfig_vhosts import aligned
from flow_sidecar_client.flowconfig_vhosts import number as _n
from flow_sidecar_client.sidecar_url import DEFAULT_SIDECAR_URL, sidecar_url
from flow_sidecar_client.sidecar_url import ENV as URL_ENV

FLOW_OPTIONS = {
    "flow_stop_count": "qpid.flow_stop_count",
    "flow_resume_count": "qpid.flow_resume_count",
    "flow_stop_size": "qpid.flow_stop_size",
    "flow_resume_size": "qpid.flow_resume_size",
}
# when a queue is warned before its stop (docs/graded-flow.md): seconds, share of a stop
WARNING_OPTIONS = {
    "warning_horizon": "flow.warning_horizon",
    "warning_fraction": "flow.warning_fraction",
}
SETTING_OPTIONS = {**FLOW_OPTIONS, **WARNING_OPTIONS}


DIMENSIONS = (("qpid.flow_stop_count", "qpid.flow_resume_count", "count"),
              ("qpid.flow_stop_size", "qpid.flow_resume_size", "size"))
SOURCE_WORDS = {"arguments": "its declare arguments", "default": "the default thresholds"}


def _option(key: str) -> str:
    return "--" + key.removeprefix("qpid.").replace("_", "-")


def missing_stop(values: dict[str, float], view: dict[str, Any] | None,
                 queue: str) -> str | None:
    """Why settings with a resume but no stop in the same dimension are refused, or None.

    Stored settings replace a dimension's other sources as a whole (Qpid resolves each
    dimension from one source), so a resume stored alone would be ignored with a warning
    while the stop still comes from the arguments or defaults: exit 1 and say which stop is
    missing, rather than exit 0 having changed nothing."""
    for stop, resume, dimension in DIMENSIONS:
        if resume not in values or stop in values:
            continue
        current = ((view or {}).get("thresholds") or {}).get(stop)
        source = ((view or {}).get("sources") or {}).get(dimension)
        where = (f" (its stop {current} comes from {SOURCE_WORDS[source]}, which stored "
                 f"settings replace, not complete)" if current and source in SOURCE_WORDS
                 else "")
        example = f", e.g. {_option(stop)} {current} {_option(resume)} {values[resume]}" \
            if current else ""
        return (f"{_option(resume)} {values[resume]} needs a stop to resume from: no {stop} "
                f"would be stored for queue {queue!r}{where}; give {_option(stop)} too"
                f"{example}")
    return None


def _common(top: bool) -> argparse.ArgumentParser:
    """Options accepted before and after the command; only the top level sets defaults,
    so `flow-config --url X list` and `flow-config list --url X` mean the same."""
    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=default(sidecar_url()),
                        help=f"the sidecar's API (env {URL_ENV}, default {DEFAULT_SIDECAR_URL})")
    common.add_argument("--token", default=default(os.environ.get("FLOW_TOKEN")),
                        help="bearer token for writes (env FLOW_TOKEN)")
    common.add_argument("--vhost", default=default(None),
                        help="virtual host (default /; list: every vhost)")
    common.add_argument("--json", action="store_true", default=default(False),
                        help="print JSON instead of a table")
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common(top=False)
    parser = argparse.ArgumentParser(prog="flow-config", parents=[_common(top=True)],
                                     description="qpid-config-style flow settings for "
                                                 "flow-sidecar")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("add", "store a queue's flow thresholds (replaces earlier ones)"),
                       ("set", "change some of a queue's stored flow thresholds")):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument("names", nargs="+", metavar="QUEUE")
        for option in SETTING_OPTIONS:
            sub.add_argument("--" + option.replace("_", "-"), dest=option,
                             **flowconfig_vhosts.value_type(option))
    for name, text in (("del", "forget a queue's stored flow thresholds"),
                       ("show", "one queue's flow state, thresholds and sources")):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument("names", nargs="+", metavar="QUEUE")
    sub = commands.add_parser("list", parents=[common], aliases=["queues"],
                              help="every queue's flow state")
    sub.add_argument("pattern", nargs="?", help="name glob, e.g. 'orders.*'")
    sub = commands.add_parser("defaults", parents=[common],
                              help="show or change the broker-wide default thresholds")
    sub.add_argument("--stop-threshold", type=int, metavar="PERCENT")
    sub.add_argument("--resume-threshold", type=int, metavar="PERCENT")
    sub.add_argument("--queue-limit", type=int, metavar="BYTES")
    sub.add_argument("--reset", action="store_true", help="back to the start-up options")
    flowconfig_vhosts.add_commands(commands, common, SETTING_OPTIONS)
    return parser


def _queue_name(parser: argparse.ArgumentParser, names: list[str]) -> str:
    """Accept `add orders` and qpid-config's `add queue orders`."""
    if len(names) == 2 and names[0] == "queue":
        return names[1]
    if len(names) != 1:
        parser.error("give one queue name")
    return names[0]


def _table(views: list[dict[str, Any]]) -> str:
    header = ("vhost", "queue", "state", "messages", "bytes", "count stop/resume", "src",
              "size stop/resume", "src", "stopped#")
    rows = [header]
    for v in views:
        t = v.get("thresholds") or {}
        depth = v.get("depth") or {}
        sources = v.get("sources") or {}
        state = "absent" if not v.get("exists") else "STOPPED" if v["flowStopped"] else "ok"
        if v.get("stale"):
            state += " (stale)"
        rows.append((
            v["vhost"], v["queue"], state, _n(depth.get("messages")), _n(depth.get("bytes")),
            f"{_n(t.get('qpid.flow_stop_count'))}/{_n(t.get('qpid.flow_resume_count'))}",
            sources.get("count", "-"),
            f"{_n(t.get('qpid.flow_stop_size'))}/{_n(t.get('qpid.flow_resume_size'))}",
            sources.get("size", "-"), _n(v.get("flowStoppedCount")),
        ))
    return "\n".join(aligned(rows))


def _details(view: dict[str, Any]) -> str:
    lines = [_table([view])]
    for label, key in (("stored settings", "settings"), ("limits", "limits")):
        if view.get(key):
            lines.append(f"{label}: " + ", ".join(f"{k}={_n(v)}" for k, v in view[key].items()))
    lines += [f"config error: {e}" for e in view.get("configErrors", [])]
    lines += [f"config warning: {w}" for w in view.get("configWarnings", [])]
    return "\n".join(lines)


def run(argv: Sequence[str]) -> tuple[int, str]:
    """Execute one command; (exit code, text to print)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if "FLOW_CONFIG_URL" in os.environ and URL_ENV not in os.environ:
        # its name before every client read one setting: refuse rather than ask 127.0.0.1
        parser.error(f"FLOW_CONFIG_URL is now {URL_ENV}, the one setting of every client")
    api = FlowApi(args.url, args.token)
    vhost = args.vhost or "/"
    out: Any
    if args.command in flowconfig_vhosts.COMMANDS:
        out, text = flowconfig_vhosts.run(api, args, parser, SETTING_OPTIONS)
        return 0, json.dumps(out, indent=2, ensure_ascii=False) if args.json else text
    if args.command in ("add", "set"):
        queue = _queue_name(parser, args.names)
        given = {key: getattr(args, opt) for opt, key in SETTING_OPTIONS.items()
                 if getattr(args, opt) is not None}
        if not given:
            parser.error(f"{args.command} needs at least one of "
                         + ", ".join("--" + o.replace("_", "-") for o in SETTING_OPTIONS)
                         + " (del forgets a queue's settings)")
        view = api.queue_or_none(vhost, queue)
        values = {**stored_settings(view), **given} if args.command == "set" else given
        refusal = missing_stop(values, view, queue)
        if refusal is not None:
            raise ApiError(refusal)
        out = api.put_flow(vhost, queue, values)
    elif args.command == "del":
        out = api.delete_flow(vhost, _queue_name(parser, args.names))
    elif args.command == "show":
        out = api.queue(vhost, _queue_name(parser, args.names))
    elif args.command in ("list", "queues"):
        out = api.queues(args.vhost, args.pattern)
    else:
        out = _defaults(api, args)
    if args.json:
        return 0, json.dumps(out, indent=2, ensure_ascii=False)
    if args.command == "defaults":
        return 0, _defaults_text(out)
    return 0, _table(out) if isinstance(out, list) else _details(out)


def _defaults_text(out: dict[str, Any]) -> str:
    """The defaults in effect, where they come from, and the start-up options they may
    override (stored API defaults win over the flags until `--reset`)."""
    startup = out.get("startup") or {}
    lines = [f"{k}: {v}" for k, v in out.items() if k not in ("source", "startup")]
    if out.get("source") == "api":
        lines.append("source: api (stored; overrides the start-up options until "
                     "`flow-config defaults --reset`)")
    else:
        lines.append("source: startup (the flags / FLOW_* variables)")
    lines.append("startup options: " + ", ".join(f"{k}: {v}" for k, v in startup.items()))
    return "\n".join(lines)


def _defaults(api: FlowApi, args: argparse.Namespace) -> dict[str, Any]:
    if args.reset:
        return api.reset_defaults()
    changes = {"defaultFlowStopThreshold": args.stop_threshold,
               "defaultFlowResumeThreshold": args.resume_threshold,
               "defaultQueueLimit": args.queue_limit}
    if all(v is None for v in changes.values()):
        return api.defaults()
    current = api.defaults()
    return api.put_defaults({k: current[k] if v is None else v for k, v in changes.items()})


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: print the result, or the error and its exit code."""
    try:
        code, text = run(sys.argv[1:] if argv is None else argv)
    except ApiError as exc:
        print(f"flow-config: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    print(text)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
