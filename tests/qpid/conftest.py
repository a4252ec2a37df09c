"""Fixtures for the tests against real qpidd brokers (tests/qpid/, marked integration).

Each broker configuration (its --default-flow-* and --default-queue-limit options) is
started once per session on its own loopback port and stopped at the end; every test
gets unique queue names. Without a qpidd (deploy/ensure-qpidd.sh builds one from the
Apache Qpid C++ source) or without Python's proton client the whole folder is skipped,
with the reason.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from sidecar.flow.thresholds import DefaultPolicy
from tests.utils.qpidd import Qpidd, missing

if TYPE_CHECKING:
    from tests.utils.qpid_traffic import Traffic

# Broker configurations by name: the policy our functions must be given, and qpidd's options.
CONFIGS: dict[str, DefaultPolicy] = {
    "default": DefaultPolicy(80, 70, 104857600),
    "custom": DefaultPolicy(90, 75, 2000),
    "defaults-off": DefaultPolicy(0, 0, 104857600),
}


def options(policy: DefaultPolicy) -> tuple[str, ...]:
    """qpidd's command-line options for a policy."""
    return ("--default-flow-stop-threshold", str(policy.stop_percent),
            "--default-flow-resume-threshold", str(policy.resume_percent),
            "--default-queue-limit", str(policy.queue_limit))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = missing()
    if reason is None:
        return
    for item in items:
        if "tests/qpid/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def qpid() -> Iterator[Callable[[str], Traffic]]:
    """`qpid(name)`: traffic to the qpidd running configuration `name` of CONFIGS (its
    broker is `.broker`), started on first use, stopped after the session."""
    from tests.utils.qpid_traffic import Traffic  # needs proton: only once not skipped

    running: dict[str, Traffic] = {}

    def get(name: str) -> Traffic:
        if name not in running:
            broker = Qpidd(*options(CONFIGS[name]))
            try:
                running[name] = Traffic(broker)
            except Exception:
                broker.stop()
                raise
        return running[name]

    yield get
    for traffic in running.values():
        traffic.close()
        traffic.broker.stop()


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Unique queue names for this test."""
    base = f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    counter = itertools.count()
    return lambda: f"{base}-{next(counter)}"
