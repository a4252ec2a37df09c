"""After its first poll a process leaves its long-lived state out of garbage collections
and collects less often (`sidecar.flow.poller.settle_long_lived`): a fresh interpreter,
since it happens once a process."""

from __future__ import annotations

import json
import subprocess
import sys

from sidecar.flow.poller import GC_THRESHOLDS

CHECK = """
import gc, json
from sidecar.flow.poller import settle_long_lived
seen = {"before": gc.get_threshold()}
settle_long_lived()
seen.update(after=gc.get_threshold(), frozen=gc.get_freeze_count())
gc.set_threshold(700, 10, 10)
settle_long_lived()  # once a process: the second call changes nothing
seen["again"] = gc.get_threshold()
print(json.dumps(seen))
"""


def test_the_first_poll_freezes_what_lives_and_raises_the_thresholds_once() -> None:
    seen = json.loads(subprocess.run([sys.executable, "-c", CHECK], capture_output=True,
                                     text=True, check=True).stdout)
    assert seen["before"] == [700, 10, 10]  # Python's defaults until then
    assert seen["after"] == list(GC_THRESHOLDS) and seen["frozen"] > 1000
    assert seen["again"] == [700, 10, 10]
