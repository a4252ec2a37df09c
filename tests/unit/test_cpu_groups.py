"""The soak bench's CPU cgroups (`tests/utils/cpu_groups.py`): the weight read from the
project's unit, a clear error where no controller is, and on this machine (root) a real
process moved into a cgroup with its weight and back out."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.utils.cpu_groups import DEFAULT_WEIGHT, CpuGroups, unit_weight


def test_the_sidecar_weight_is_the_units() -> None:
    unit = Path(__file__).resolve().parents[2] / "deploy" / "flow-sidecar.service"
    assert f"CPUWeight={unit_weight()}\n" in unit.read_text()
    assert unit_weight() > DEFAULT_WEIGHT  # the sidecar asks for the core first


def test_a_unit_without_a_weight_is_named(tmp_path: Path) -> None:
    unit = tmp_path / "x.service"
    unit.write_text("[Service]\nNice=0\n")
    with pytest.raises(ValueError, match="x.service sets no CPUWeight="):
        unit_weight(unit)


def test_no_controller_is_said(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    with pytest.raises(OSError, match="no cpu cgroup controller"):
        CpuGroups.find(tmp_path)


def real_groups() -> CpuGroups:
    try:
        return CpuGroups.find(name=f"flow-bench-test-{os.getpid()}")
    except OSError as error:  # not root, or a container without its cgroups
        pytest.skip(f"no writable cpu cgroup here: {error}")


def cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") or controllers == "":
            return path
    return ""


def test_a_process_is_placed_with_its_weight_and_moved_back() -> None:
    groups = real_groups()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        groups.place("server", [sleeper.pid], 400)
        assert cgroup_of(sleeper.pid) == f"/{groups.base.name}/server"
        assert groups.weights() == "server 400"
        groups.place("other", [os.getpid()])
        assert cgroup_of(os.getpid()) == f"/{groups.base.name}/other"
        assert groups.weights() == "server 400, other 100"
    finally:
        groups.remove()
    try:
        assert cgroup_of(sleeper.pid) == cgroup_of(os.getpid()) == "/"
        assert not groups.base.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
