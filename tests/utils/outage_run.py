"""Producers against a queue at its stop while the sidecar goes away and comes back (or
not): the peak depth, for tests/integration/test_publisher_outage.py and
bench/outage_overshoot.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pika
import requests

from flow_sidecar_client import FlowControlledPublisher, FlowControlTimeout
from tests.utils.sidecar_process import SidecarProcess, eventually

BODY = b"m" * 100


@dataclass
class Outage:
    """What one run saw: the most the queue held, what was sent, and when (s after the
    sidecar went away) the queue first passed stop + the producers' summed windows."""

    peak: int = 0
    sent: int = 0
    past_bound_after: float | None = None
    back_after: float | None = None  # when the restarted sidecar answered /readyz
    depths: list[tuple[float, int]] = field(default_factory=list)


def _produce(make: Callable[[], FlowControlledPublisher], done: threading.Event,
             counts: list[int], errors: list[BaseException]) -> None:
    try:
        with make() as publisher:
            while not done.is_set():
                try:
                    publisher.publish(BODY)
                    counts.append(1)
                except FlowControlTimeout:
                    continue
    except BaseException as exc:  # noqa: BLE001  # reported by the caller
        errors.append(exc)


def outage_peak(amqp: str, sidecar: SidecarProcess, queue: str, *,
                how: Literal["kill", "term", "gone"], down: float = 3.0, after: float = 4.0,
                producers: int = 4, capacity: int = 50, stop: int = 1_000,
                **publisher: Any) -> Outage:
    """`producers` publishers of `capacity` fill `queue` (declared here with its stop);
    once it holds half its stop the sidecar is killed (-9), or stopped (SIGTERM), for
    `down` s and started again ("gone": never), and the producers go on until it answers
    again (`back_after`: a loaded machine takes seconds to start it) and `after` s more.
    The depth is read exactly (passive declares) every 20 ms throughout."""
    connection = pika.BlockingConnection(pika.URLParameters(amqp))
    channel = connection.channel()
    channel.queue_declare(queue, arguments={"qpid.flow_stop_count": stop,
                                            "qpid.flow_resume_count": stop // 2})
    bound = stop + producers * capacity
    seen = Outage()
    try:
        eventually(lambda: sidecar.get(f"/flow/%2F/{queue}").json().get("depth") is not None,
                   timeout=30)
        done, counts, errors = threading.Event(), [], []  # type: ignore[var-annotated]
        threads = [threading.Thread(target=_produce, daemon=True, args=(
            lambda: FlowControlledPublisher(queue, capacity=capacity, amqp=amqp,
                                            sidecar_url=sidecar.url,
                                            flow_control_wait_failure=1_000, **publisher),
            done, counts, errors)) for _ in range(producers)]
        for t in threads:
            t.start()

        def depth() -> int:
            count: int = channel.queue_declare(queue, passive=True).method.message_count
            return count

        def back() -> bool:
            try:
                return sidecar.http.get(sidecar.url + "/readyz", timeout=0.2).ok
            except requests.RequestException:
                return False

        def sample(seconds: float, since: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                now, d = time.monotonic(), depth()
                if restarted and seen.back_after is None and back():
                    seen.back_after = time.monotonic() - since
                seen.depths.append((now - since, d))
                seen.peak = max(seen.peak, d)
                if d > bound and seen.past_bound_after is None and now >= since:
                    seen.past_bound_after = now - since
                time.sleep(0.02)

        start = time.monotonic()
        while depth() < stop // 2:
            assert time.monotonic() - start < 30 and not errors, errors
            time.sleep(0.01)
        went, restarted = time.monotonic(), False
        (sidecar.stop if how == "term" else sidecar.kill)()
        sample(down, went)
        if how != "gone":
            sidecar.start(wait_ready=False)
            restarted = True
            while seen.back_after is None and time.monotonic() - went < 60:
                sample(0.2, went)  # until it answers again: a slow start is in the outage
        sample(after, went)
        done.set()
        for t in threads:
            t.join(15)
        assert not errors, errors
        seen.sent = len(counts)
        seen.peak = max(seen.peak, depth())
        return seen
    finally:
        channel.queue_delete(queue)
        connection.close()
