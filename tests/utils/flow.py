"""Reading flow answers from a running sidecar in tests."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess, eventually


def flow(sidecar: SidecarProcess, queue: str, vhost: str = "/") -> dict[str, Any]:
    r = sidecar.get(flow_path(queue, vhost))
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def known(sidecar: SidecarProcess, queue: str, vhost: str = "/") -> str:
    """Wait until the sidecar's poller has seen the queue and its first statistics (a live
    sample can give a new queue a message count before they bring its bytes)."""
    def seen() -> bool:
        r = sidecar.get(flow_path(queue, vhost))
        if r.status_code != 200:
            return False
        answer = r.json()
        return answer["depth"] is not None and (
            answer["depth"]["bytes"] is not None or answer["sources"]["size"] != "default")
    eventually(seen)
    return queue


def wait_depth(sidecar: SidecarProcess, queue: str, messages: int,
               vhost: str = "/", nbytes: int | None = None,
               stopped: bool | None = None) -> dict[str, Any]:
    """Wait for the broker's depth refresh to reach the sidecar; return that answer. With
    `nbytes`, also for the byte count: a live sample brings the message count first, with
    bytes estimated from the messages the statistics last saw. With `stopped`, also for
    that state: a live sample shows a fall at once, but only an upper bound of the depth
    resumes a queue, which for one whose size is watched means statistics newer than its
    last live sample (docs/live-depth.md)."""
    answer: dict[str, Any] = eventually(
        lambda: (f := flow(sidecar, queue, vhost))["depth"] is not None
        and f["depth"]["messages"] == messages
        and (nbytes is None or f["depth"]["bytes"] == nbytes)
        and (stopped is None or f["flowStopped"] is stopped) and f)
    return answer


def routed(sidecar: SidecarProcess, exchange: str, count: int, vhost: str = "/") -> str:
    """Wait until the sidecar routes `exchange` to `count` queues (its bindings are read)."""
    path = f"/flow/exchange/{quote(vhost, safe='')}/{quote(exchange, safe='')}"
    eventually(lambda: len(sidecar.get(path).json().get("destinations", [])) == count)
    return exchange
