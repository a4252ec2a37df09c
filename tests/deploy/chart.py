"""The Helm chart as tests see it: where it is, how the real Helm binary renders it, and the
flow-sidecar container pulled out of whatever holds it (Deployment or sidecar snippets)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sidecar.config import Settings

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "flow-sidecar"
SCENARIOS = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))
RELEASE = "flow"
NAMESPACE = "rabbitmq"
FULLNAME = "flow-flow-sidecar"

# Every environment variable flow-sidecar reads: FLOW_ + a Settings field, upper case.
FLOW_NAMES = frozenset("FLOW_" + name.upper() for name in Settings.model_fields)

Doc = dict[str, Any]
# The `render` fixture: a ci/ scenario (or None) and --set assignments to objects.
RenderFn = Callable[..., list[Doc]]


def find_helm() -> str | None:
    """The helm deploy/ensure-helm.sh provides: one on PATH, else .cache/bin/helm."""
    cached = REPO / ".cache" / "bin" / "helm"
    return shutil.which("helm") or (str(cached) if os.access(cached, os.X_OK) else None)


def helm_run(helm: str, command: str, scenario: str | None,
             *args: str) -> subprocess.CompletedProcess[str]:
    """`helm template` or `helm lint` of the chart with a ci/ scenario and more arguments."""
    argv = [helm, command]
    if command == "template":
        argv += [RELEASE, "--namespace", NAMESPACE]
    argv.append(str(CHART))
    if scenario:
        argv += ["-f", str(CHART / "ci" / scenario)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def sets(*assignments: str) -> list[str]:
    """--set arguments for helm_run."""
    return [arg for assignment in assignments for arg in ("--set", assignment)]


def scenario_values(scenario: str) -> Doc:
    loaded: Doc = yaml.safe_load((CHART / "ci" / scenario).read_text())
    return loaded


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[Doc], kind: str, name: str = FULLNAME) -> Doc:
    found = [doc for doc in by_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, got {len(found)}"
    return found[0]


@dataclass
class Placement:
    """The flow-sidecar container where one rendering puts it, with its pod's volumes and
    pod annotations."""

    where: str
    container: Doc
    volumes: list[Doc]
    annotations: dict[str, str]


def flow_container(containers: list[Doc]) -> Doc:
    found = [c for c in containers if c["name"] == "flow-sidecar"]
    assert len(found) == 1, [c["name"] for c in containers]
    return found[0]


def placements(docs: list[Doc]) -> list[Placement]:
    """The Deployment's container, or in sidecar mode the container of both snippets (each
    parsed from its ConfigMap key, so a snippet that is not valid YAML fails here)."""
    found = []
    for deployment in by_kind(docs, "Deployment"):
        pod = deployment["spec"]["template"]
        found.append(Placement("Deployment", flow_container(pod["spec"]["containers"]),
                               pod["spec"]["volumes"], pod["metadata"]["annotations"]))
    for cm in by_kind(docs, "ConfigMap"):
        if cm["metadata"]["name"] != FULLNAME + "-snippets":
            continue
        patch = yaml.safe_load(cm["data"]["rabbitmqcluster-patch.yaml"])
        pod = patch["spec"]["override"]["statefulSet"]["spec"]["template"]
        found.append(Placement("RabbitmqCluster override",
                               flow_container(pod["spec"]["containers"]),
                               pod["spec"]["volumes"], pod["metadata"]["annotations"]))
        sidecars = yaml.safe_load(cm["data"]["bitnami-values.yaml"])
        found.append(Placement("sidecars value", flow_container(sidecars["sidecars"]),
                               sidecars["extraVolumes"], sidecars["podAnnotations"]))
    return found
