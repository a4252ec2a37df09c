"""Put a bench's processes in CPU cgroups of their own, as they run when deployed.

A systemd service and a Kubernetes container each run in a cgroup of their own, and when
cores are short the kernel shares them between those cgroups by their weights
(`CPUWeight=`, a container's CPU request), whatever the number of threads in each. A bench
started from one shell runs the broker, the sidecar and its clients in one cgroup instead,
where the kernel shares the cores between threads: a broker with a dozen busy schedulers
then outweighs the sidecar's one event loop, which a deployment would not let happen.
`CpuGroups` rebuilds the deployment's arrangement on this machine: one cgroup per party
under `flow-bench/`, each with its weight (systemd's scale: 100 is the default, the
sidecar's unit asks `unit_weight()`), moved back and removed at the end.

It uses cgroup v1's `cpu` hierarchy (`cpu.shares`, 1024 for a weight of 100, as systemd
maps it) or, where the `cpu` controller is on cgroup v2, `cpu.weight`. Moving a process
needs root; `CpuGroups.find` says why it cannot when it cannot.
"""

from __future__ import annotations

import re
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
UNIT = Path(__file__).resolve().parents[2] / "deploy" / "flow-sidecar.service"
DEFAULT_WEIGHT = 100  # systemd's CPUWeight= when a unit sets none, a broker's unit included


def unit_weight(unit: Path = UNIT) -> int:
    """The `CPUWeight=` the project's systemd unit gives the sidecar (read, not repeated)."""
    found = re.search(r"^CPUWeight=(\d+)\s*$", unit.read_text(), re.MULTILINE)
    if not found:
        raise ValueError(f"{unit} sets no CPUWeight=")
    return int(found.group(1))


class CpuGroups:
    """Cgroups named for the parties of a bench, under `root/name`."""

    def __init__(self, root: Path, version: int, name: str = "flow-bench") -> None:
        self.base = root / name
        self.root = root
        self.version = version
        # v1 weighs in shares, 1024 for systemd's 100; v2 in systemd's own scale
        self.weight_file, self.scale = ("cpu.shares", 1024) if version == 1 else (
            "cpu.weight", DEFAULT_WEIGHT)
        self.placed: dict[str, list[int]] = {}

    @classmethod
    def find(cls, cgroups: Path = CGROUPS, name: str = "flow-bench") -> CpuGroups:
        """The `cpu` controller's hierarchy on this machine, checked writable, for cgroups
        under `name`; `OSError` naming what is missing otherwise."""
        for root, version in ((cgroups / "cpu", 1), (cgroups, 2), (cgroups / "unified", 2)):
            if version == 1 and (root / "cpu.shares").exists():
                break
            controllers = root / "cgroup.controllers"
            if version == 2 and controllers.exists() and "cpu" in controllers.read_text().split():
                break
        else:
            raise OSError(f"no cpu cgroup controller under {cgroups} (cgroup v1 cpu.shares or "
                          "v2 cgroup.controllers listing cpu)")
        groups = cls(root, version, name)
        groups._make_base()  # PermissionError without root, before a bench spends minutes
        weighed = (groups.base / groups.weight_file).exists()
        groups.remove()
        if not weighed:  # v2: the controller is there but not handed down to children
            raise OSError(f"the cpu controller is not enabled in {root}/cgroup.subtree_control")
        return groups

    def _make_base(self) -> None:
        if not self.base.exists():
            self.base.mkdir()
            if self.version == 2:
                (self.base / "cgroup.subtree_control").write_text("+cpu")

    def place(self, party: str, pids: list[int], weight: int = DEFAULT_WEIGHT) -> None:
        """Move each of `pids` (whole processes, every thread) into `party`'s cgroup, made
        with `weight` on systemd's scale if it is new."""
        self._make_base()
        group = self.base / party
        if not group.exists():
            group.mkdir()
            (group / self.weight_file).write_text(str(weight * self.scale // DEFAULT_WEIGHT))
        for pid in pids:
            (group / "cgroup.procs").write_text(str(pid))
            self.placed.setdefault(party, []).append(pid)

    def weights(self) -> str:
        """Each party and its weight, as the bench's report says them."""
        def weight(party: str) -> int:
            written = int((self.base / party / self.weight_file).read_text())
            return written * DEFAULT_WEIGHT // self.scale
        return ", ".join(f"{party} {weight(party)}" for party in self.placed)

    def remove(self) -> None:
        """Move every process still alive back where the machine's processes run, and remove
        the cgroups: a broker kept for the next run leaves with nothing of the bench's."""
        for party, pids in self.placed.items():
            for pid in pids:
                try:
                    (self.root / "cgroup.procs").write_text(str(pid))
                except ProcessLookupError:
                    pass  # it ended: its cgroup is empty of it already
            (self.base / party).rmdir()
        self.placed.clear()
        if self.base.exists():
            self.base.rmdir()
