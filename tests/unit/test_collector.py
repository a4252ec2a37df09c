"""When garbage collections run (`sidecar.flow.collector`): less often from the process's
start, and after its first poll without its long-lived state. Both change the process
for good, so a fresh interpreter checks them."""

from __future__ import annotations

import json
import subprocess
import sys

from sidecar.flow.collector import GC_THRESHOLDS

CHECK = """
import gc, json
from sidecar.flow import collector
seen = {"before": gc.get_threshold()}
collector.collect_less_often()
seen["at_start"] = gc.get_threshold()
counts = gc.get_stats()[2]["collections"]
collector.settle_long_lived()
seen.update(after=gc.get_threshold(), frozen=gc.get_freeze_count(),
            full=gc.get_stats()[2]["collections"] - counts)
gc.set_threshold(700, 10, 10)
collector.settle_long_lived()  # once a process: the second call changes nothing
seen["again"] = gc.get_threshold()
print(json.dumps(seen))
"""


def test_thresholds_from_the_start_and_the_first_poll_freezes_without_collecting() -> None:
    seen = json.loads(subprocess.run([sys.executable, "-c", CHECK], capture_output=True,
                                     text=True, check=True).stdout)
    assert seen["before"] == [700, 10, 10]  # Python's defaults until then
    assert seen["at_start"] == list(GC_THRESHOLDS)
    assert seen["after"] == list(GC_THRESHOLDS) and seen["frozen"] > 1000
    assert seen["full"] == 0  # no walk over the first poll's objects
    assert seen["again"] == [700, 10, 10]
