"""Garbage collection in the sidecar: thresholds set by `api.process_tuning` at the
process's start, and the long-lived state frozen after its first poll
(`sidecar.flow.collector`). Both change the process for good, so a fresh interpreter
checks them."""

from __future__ import annotations

import json
import subprocess
import sys

from api.process_tuning import GC_THRESHOLDS, GIL_SWITCH_INTERVAL

CHECK = """
import gc, json, sys
from api import process_tuning
from sidecar.flow import collector
seen = {"before": gc.get_threshold()}
process_tuning.tune_process()
seen["at_start"] = gc.get_threshold()
seen["switch"] = sys.getswitchinterval()
counts = gc.get_stats()[2]["collections"]
collector.settle_long_lived()
seen.update(frozen=gc.get_freeze_count(), full=gc.get_stats()[2]["collections"] - counts)
frozen = gc.get_freeze_count()
collector.settle_long_lived()  # once a process: the second call changes nothing
seen["again"] = gc.get_freeze_count() - frozen
print(json.dumps(seen))
"""


def test_thresholds_from_the_start_and_the_first_poll_freezes_without_collecting() -> None:
    seen = json.loads(subprocess.run([sys.executable, "-c", CHECK], capture_output=True,
                                     text=True, check=True).stdout)
    assert seen["before"] == [700, 10, 10]  # Python's defaults until then
    assert seen["at_start"] == list(GC_THRESHOLDS)
    assert seen["switch"] == GIL_SWITCH_INTERVAL
    assert seen["frozen"] > 1000
    assert seen["full"] == 0  # no walk over the first poll's objects
    assert seen["again"] == 0
