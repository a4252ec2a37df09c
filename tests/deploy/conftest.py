"""Fixtures for the deployment artefacts: a real Helm binary and every ci/ scenario rendered
once, and Settings built from nothing but given FLOW_* variables."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import yaml

from sidecar.config import Settings
from tests.deploy.chart import SCENARIOS, Doc, RenderFn, find_helm, helm_run, sets


@pytest.fixture(scope="session")
def helm() -> str:
    path = find_helm()
    if path is None:
        pytest.fail("no helm binary: run the tests with deploy/test.sh, which runs "
                    "deploy/ensure-helm.sh")
    return path


@pytest.fixture(scope="session")
def render(helm: str) -> RenderFn:
    """`helm template` with a ci/ scenario (or None) and --set overrides, as objects."""

    def run(scenario: str | None, *assignments: str) -> list[Doc]:
        result = helm_run(helm, "template", scenario, *sets(*assignments))
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return run


@pytest.fixture(scope="session")
def rendered(render: RenderFn) -> dict[str, list[Doc]]:
    """Every ci/ scenario, rendered once for the session."""
    return {scenario: render(scenario) for scenario in SCENARIOS}


@pytest.fixture
def settings_from_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, str]], Settings]:
    """Settings as flow-sidecar builds them at start-up, from these variables and no others."""

    def build(env: dict[str, str]) -> Settings:
        for name in list(os.environ):
            if name.upper().startswith("FLOW_"):
                monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return Settings()

    return build
