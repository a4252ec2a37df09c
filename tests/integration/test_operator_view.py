"""What an operator sees of choices that outlive a restart or come from several sources:
stored defaults against the start-up flags, and flow-config on a queue whose stop comes
from its arguments. Real sidecar processes, the real CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.integration.conftest import Broker
from tests.integration.test_cli_and_security import flow_config
from tests.utils.flow import flow, known
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess

Names = Callable[[str], str]
FLAGS_90_75 = ("--default-flow-stop-threshold", "90", "--default-flow-resume-threshold", "75")


def test_stored_defaults_win_over_new_flags_and_say_so(
        sidecar_factory: Callable[..., SidecarProcess], tmp_path: Path) -> None:
    data = tmp_path / "kept"
    first = sidecar_factory(data_dir=data).start()
    r = first.put("/defaults", json={"defaultFlowStopThreshold": 60,
                                     "defaultFlowResumeThreshold": 50,
                                     "defaultQueueLimit": 104857600})
    assert r.status_code == 200 and r.json()["source"] == "api"
    first.stop()

    again = sidecar_factory(*FLAGS_90_75, data_dir=data).start()
    warnings = [line for line in again.log().splitlines()
                if "override the start-up options" in line]
    assert len(warnings) == 1 and " WARNING " in warnings[0]
    assert ("--default-flow-stop-threshold=60 --default-flow-resume-threshold=50 "
            "--default-queue-limit=104857600 in effect, not --default-flow-stop-threshold=90 "
            "--default-flow-resume-threshold=75") in warnings[0]
    expected = {"defaultFlowStopThreshold": 60, "defaultFlowResumeThreshold": 50,
                "defaultQueueLimit": 104857600, "source": "api",
                "startup": {"defaultFlowStopThreshold": 90, "defaultFlowResumeThreshold": 75,
                            "defaultQueueLimit": 104857600}}
    assert again.get("/defaults").json() == expected
    assert again.get("/healthz").json()["defaults"] == expected
    shown = flow_config(again, "defaults")
    assert shown.returncode == 0, shown.stderr
    assert "defaultFlowStopThreshold: 60" in shown.stdout
    assert "source: api (stored; overrides the start-up options" in shown.stdout
    assert "startup options: defaultFlowStopThreshold: 90, defaultFlowResumeThreshold: 75" \
        in shown.stdout

    reset = flow_config(again, "defaults", "--reset")
    assert reset.returncode == 0 and "defaultFlowStopThreshold: 90" in reset.stdout
    assert "source: startup" in reset.stdout
    again.stop()
    third = sidecar_factory(*FLAGS_90_75, data_dir=data).start()  # the same log file
    assert third.log().count("override the start-up options") == 1  # the second run's
    assert third.get("/defaults").json()["source"] == "startup"
