"""`/openapi.json` describes every answer: a schema-based fuzzer (schemathesis) calls every
route of the in-process app with generated requests, fixed seed, bounded in examples, and
checks each answer against the documented status codes, content types and schemas.

`/events` (an endless Server-Sent-Events stream) is left out; long-poll `wait` values are
clamped to a few milliseconds so a generated `wait=300` does not park the run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.main import Sidecar, build
from sidecar.config import Settings
from sidecar.signals.exchange_routing import Binding, Topology
from tests.api.conftest import ScriptedBroker

EXAMPLES = 40  # per route; a fixed seed (derandomize) makes every run the same
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


# Requests that reach real objects (random names mostly get a 404): each operation is
# also called with these path parameters and, for writes, this body. (Not vhost "/":
# the fuzzer puts path parameters in unencoded.)
KNOWN = {"vhost": "v1", "queue": "orders", "exchange": "ex", "asset": "dashboard.js"}
BODIES = {
    "PUT /queues/{vhost}/{queue}/flow": {"qpid.flow_stop_count": 950},
    "PUT /defaults": {"defaultFlowStopThreshold": 80, "defaultFlowResumeThreshold": 70,
                      "defaultQueueLimit": 104857600},
    "POST /webhooks": {"url": "http://127.0.0.1:9/other", "secret": "t" * 20},
    "POST /grants/{vhost}/{queue}": {"messages": 5, "bytes": 500},
    "POST /grants/exchange/{vhost}/{exchange}": {"messages": 5},
    "POST /grants/release": {"grants": [{"grantId": "never-granted", "usedMessages": 0}]},
}


def sidecar_with_queues(data_dir: Path) -> Sidecar:
    """A sidecar that has polled a broker with a few queues, an exchange and a webhook."""
    broker = ScriptedBroker()
    broker.queue("orders", 901, 1200, arguments={"qpid.flow_stop_count": 900})
    broker.queue("orders", 10, 100, vhost="v1")
    broker.queue("a/b", None, None)
    broker.queue("ring", 3, 30, arguments={"x-max-length": 10})
    broker.topology = Topology.build({("v1", "ex"): "direct"},
                                     [Binding("v1", "ex", "orders", "queue", "k")])
    sidecar = build(Settings(data_dir=data_dir), broker)
    asyncio.run(sidecar.runtime.poller.poll_once())
    hook = sidecar.runtime.outbox.create(url="http://127.0.0.1:9/hook", secret="s" * 20,
                                         vhost="*", queue="*")
    KNOWN["sub_id"] = hook.id
    return sidecar


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    made = sidecar_with_queues(tmp_path_factory.mktemp("fuzz"))
    yield made
    made.runtime.recorder.close()
    made.store.close()


def test_every_answer_matches_the_document(sidecar: Sidecar) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", sidecar.asgi).exclude(
        path="/events")
    failures: dict[str, str] = {}
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        tried += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case) -> None:
            if case.query and "wait" in case.query:
                case.query["wait"] = 0.005
            if isinstance(case.body, dict) and "wait" in case.body:  # grants wait in the body
                case.body["wait"] = 0.005
            case.call_and_validate(checks=CHECKS)

        try:
            known = operation.Case(
                path_parameters={k: v for k, v in KNOWN.items() if f"{{{k}}}" in operation.path},
                **({"body": BODIES[operation.label]} if operation.label in BODIES else {}))
            known.call_and_validate(checks=CHECKS)
            check()
        except Exception as exc:  # report every route's failure, not only the first
            failures[operation.label] = f"{type(exc).__name__}: {exc}"[:2000]
    assert tried >= 15, tried
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in failures.items())
