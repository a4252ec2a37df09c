"""The command-line tools as a user runs them, and the write token."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.integration.conftest import MGMT, Broker
from tests.utils.flow import known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port

BIN = Path(sys.executable).parent
Names = Callable[[str], str]


def flow_config(sidecar: SidecarProcess, *args: str, token: str | None = None
                ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    env["FLOW_SIDECAR_URL"] = sidecar.url
    if token:
        env["FLOW_TOKEN"] = token
    return subprocess.run([str(BIN / "flow-config"), *args], capture_output=True, text=True,
                          env=env, timeout=30)


def test_flow_config_qpid_config_style(broker: Broker,
                                       sidecar_factory: Callable[..., SidecarProcess],
                                       qname: Names) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2", "--token", "s3cret").start()
    q = known(sidecar, broker.declare(qname("cli")))

    done = flow_config(sidecar, "add", q, "--flow-stop-count", "900", "--flow-resume-count",
                       "500", token="s3cret")
    assert done.returncode == 0, done.stderr
    assert "900/500" in done.stdout and "api" in done.stdout

    done = flow_config(sidecar, "set", "queue", q, "--flow-resume-count", "400", token="s3cret")
    assert done.returncode == 0 and "900/400" in done.stdout

    refused = flow_config(sidecar, "add", q, "--flow-stop-count", "5", "--flow-resume-count",
                          "6", token="s3cret")
    assert refused.returncode == 1
    assert "qpid.flow_resume_count=6 must be less or equal to qpid.flow_stop_count=5" in \
        refused.stderr

    wrong = flow_config(sidecar, "del", q, token="nope")
    assert wrong.returncode == 4 and "refused the token" in wrong.stderr

    nothing = flow_config(sidecar, "add", q, token="s3cret")  # would clear the settings
    assert nothing.returncode == 2 and "needs at least one of --flow-stop-count" in \
        nothing.stderr

    listed = flow_config(sidecar, "list", "--json")
    assert listed.returncode == 0 and f'"queue": "{q}"' in listed.stdout
    table = flow_config(sidecar, "list", q).stdout.splitlines()
    assert table[0].split()[:3] == ["vhost", "queue", "state"]
    assert table[1].split()[:3] == ["/", q, "ok"] and "900/400" in table[1]
    assert flow_config(sidecar, "show", q).stdout.count("900/400") == 1
    assert flow_config(sidecar, "del", q, token="s3cret").returncode == 0
    assert sidecar.get(queue_path(q)).json()["settings"]["qpid.flow_stop_count"] is None

    defaults = flow_config(sidecar, "defaults", "--stop-threshold", "90", token="s3cret")
    assert defaults.returncode == 0 and "defaultFlowStopThreshold: 90" in defaults.stdout
    assert flow_config(sidecar, "defaults", "--reset", token="s3cret").returncode == 0

    sidecar.stop()
    down = flow_config(sidecar, "list")
    assert down.returncode == 3 and "cannot reach flow-sidecar" in down.stderr
    elsewhere = subprocess.run([str(BIN / "flow-config"), "--url", MGMT, "list"],  # not us
                               capture_output=True, text=True, timeout=30)
    assert elsewhere.returncode == 1 and "GET /queues: 404: " in elsewhere.stderr
    assert "None" not in elsewhere.stderr  # RabbitMQ's own words, not a Python null


def test_writes_need_the_token_reads_do_not(broker: Broker, qname: Names,
                                            sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--token", "t0ken").start()
    path = queue_path(qname("tok")) + "/flow"
    assert sidecar.put(path, json={"qpid.flow_stop_count": 5}).status_code == 401
    assert sidecar.put(path, json={"qpid.flow_stop_count": 5},
                       headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = sidecar.put(path, json={"qpid.flow_stop_count": 5},
                     headers={"Authorization": "Bearer t0ken"})
    assert ok.status_code == 200
    assert sidecar.get("/queues").status_code == 200
    assert "t0ken" not in sidecar.log()


def test_refuses_non_loopback_listener_without_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    refused = subprocess.run(
        [str(BIN / "flow-sidecar"), "--listen", f"0.0.0.0:{free_port()}",
         "--data-dir", str(tmp_path), "--management-password", "hunter2"],
        capture_output=True, text=True, env=env, timeout=30)
    assert refused.returncode == 2
    assert "not a loopback address" in refused.stderr and "--insecure" in refused.stderr
    assert "hunter2" not in refused.stderr

    bad = subprocess.run(
        [str(BIN / "flow-sidecar"), "--default-flow-stop-threshold", "60",
         "--default-flow-resume-threshold", "70", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=30)
    assert bad.returncode == 2
    assert "--default-flow-resume-threshold=70 must be less or equal to " \
           "--default-flow-stop-threshold=60" in bad.stderr


def test_broker_credentials_never_appear(broker: Broker,
                                         sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--management-password", "wr0ng-pa55",
                              "--stale-after", "1").start(wait_ready=False)
    eventually(lambda: "broker poll failed" in sidecar.log())
    health = sidecar.get("/healthz").text + sidecar.get("/readyz").text
    assert "HTTP 401" in health
    assert "wr0ng-pa55" not in sidecar.log() + health


def test_environment_variables_configure_the_sidecar(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names) -> None:
    sidecar = sidecar_factory(env={"FLOW_POLL_INTERVAL": "0.2",
                                   "FLOW_DEFAULT_FLOW_STOP_THRESHOLD": "50",
                                   "FLOW_DEFAULT_FLOW_RESUME_THRESHOLD": "40"}).start()
    q = known(sidecar, broker.declare(qname("env"), {"x-max-length": 10,
                                                     "x-overflow": "reject-publish"}))
    broker.publish(q, 6)
    answer = wait_depth(sidecar, q, 6)
    assert answer["thresholds"]["qpid.flow_stop_count"] == 5 and answer["flowStopped"]
