"""A sidecar restart keeps the bound (issue 44.2): 4 producers of capacity 50 on a queue
stopping at 1,000, the sidecar away for 3 s (kill -9, then SIGTERM) and started again:
with the publisher's defaults the queue never holds more than the stop + the producers'
summed windows; the old behaviour (`on_unreachable="send"`) is the baseline of the same
run. Figures: bench/outage_overshoot.py and docs/benchmarks.md."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.utils.broker_target import AMQP_URL
from tests.utils.outage_run import outage_peak
from tests.utils.sidecar_process import SidecarProcess

BOUND = 1_000 + 4 * 50


@pytest.mark.parametrize("how", ["kill", "term"])
def test_a_sidecar_restart_keeps_the_queue_within_stop_plus_windows(
        how: str, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    kept = outage_peak(AMQP_URL, sidecar, qname("kept"), how=how)  # type: ignore[arg-type]
    assert kept.sent > 1_000 // 2
    assert kept.peak <= BOUND, kept.depths[-20:]
    # the old default, in the same run: the outage sent through unchecked
    sidecar.stop()
    sidecar.start()
    opened = outage_peak(AMQP_URL, sidecar, qname("open"), how=how,  # type: ignore[arg-type]
                         on_unreachable="send")
    assert opened.peak > BOUND, (kept.peak, opened.peak)
