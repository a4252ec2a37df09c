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


def test_a_resume_without_a_stored_stop_is_refused_naming_the_stop(
        broker: Broker, shared_sidecar: SidecarProcess, qname: Names) -> None:
    """The stop comes from the queue's arguments; stored settings would replace the whole
    count dimension, so `set --flow-resume-count` alone would change nothing: exit 1."""
    q = known(shared_sidecar, broker.declare(qname("argstop"), {"qpid.flow_stop_count": 10}))
    refused = flow_config(shared_sidecar, "set", q, "--flow-resume-count", "3")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith("flow-config: --flow-resume-count 3 needs a stop to "
                                     "resume from: no qpid.flow_stop_count would be stored")
    assert "its stop 10 comes from its declare arguments" in refused.stderr
    assert "e.g. --flow-stop-count 10 --flow-resume-count 3" in refused.stderr
    assert set(shared_sidecar.get(queue_path(q)).json()["settings"].values()) == {None}
    assert flow_config(shared_sidecar, "add", q, "--flow-resume-size", "5").returncode == 1

    done = flow_config(shared_sidecar, "set", q, "--flow-stop-count", "10",
                       "--flow-resume-count", "3")
    assert done.returncode == 0, done.stderr
    answer = flow(shared_sidecar, q)
    assert answer["sources"]["count"] == "api" and answer["configWarnings"] == []
    assert answer["thresholds"]["qpid.flow_resume_count"] == 3
    again = flow_config(shared_sidecar, "set", q, "--flow-resume-count", "4")  # stop stored
    assert again.returncode == 0 and "10/4" in again.stdout
    assert flow_config(shared_sidecar, "del", q).returncode == 0
