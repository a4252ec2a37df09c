"""`--apply`: send changed recommendations to a running sidecar, dry run unless asked.

Thresholds move producers, so nothing is written by default: a dry run prints each
`PUT /queues/{vhost}/{queue}/flow` it would send. With `--yes` and a token it changes the
recommended dimensions and keeps the queue's other stored settings, through the API client
that `flow-config set` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flow_sidecar_client.api import ApiError, FlowApi, queue_path
from sidecar.flow.thresholds import COUNT, SIZE

DIMENSIONS = {COUNT.name: COUNT, SIZE.name: SIZE}
Planned = dict[tuple[str, str], dict[str, int]]


def planned(recommendations: Iterable[Any]) -> Planned:
    """The qpid.flow_* values to set per queue, from rows with `changed` true."""
    plan: Planned = {}
    for row in recommendations:
        if not row["changed"]:
            continue
        dim = DIMENSIONS[row["dimension"]]
        plan.setdefault((row["vhost"], row["queue"]), {}).update({
            dim.stop_key: int(row["recommendedStop"]),
            dim.resume_key: int(row["recommendedResume"])})
    return plan


def apply(plan: Planned, api: FlowApi, *, write: bool,
          say: Callable[[str], None] = print) -> int:
    """Print (dry run) or send every planned change; the number of queues that failed."""
    failed = 0
    for (vhost, queue), values in sorted(plan.items()):
        path = queue_path(vhost, queue) + "/flow"
        if not write:
            say(f"dry run: PUT {path} {values} (other stored settings kept)")
            continue
        try:
            api.update_flow(vhost, queue, values)
            say(f"PUT {path} {values} (other stored settings kept): done")
        except ApiError as exc:
            failed += 1
            say(f"PUT {path} {values}: {exc}")
    return failed
