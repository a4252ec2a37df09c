"""Markers by layer: everything that drives a real part (RabbitMQ, qpidd, Spark, Helm,
Chromium, a `flow-sidecar` process) is `integration`, so `pytest -m "not integration"` runs
the pure units and the in-process API layer in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

REAL_PARTS = ("integration", "pipeline", "deploy", "qpid", "cluster")
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        layer = Path(item.path).relative_to(HERE).parts[0]
        if layer in REAL_PARTS:
            item.add_marker(pytest.mark.integration)
