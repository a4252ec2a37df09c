"""`/openapi.json` describes every answer and exactly what is accepted: schemathesis calls
every route of the in-process app, with a token set, and checks the answers.

- `test_every_check_holds`: schemathesis' engine, as `st run` drives it (examples,
  coverage and fuzzing phases; schema-valid and schema-invalid data) with ALL its checks:
  no 5xx, documented statuses, content types, schemas and headers, invalid data refused,
  valid data accepted, unsupported methods 405 with a matching `Allow`, missing headers
  refused, and auth enforced where the document declares it. Fixed seed, bounded examples.
- `test_real_objects_answer_as_documented`: the same routes called on objects that exist
  (generated names mostly get a 404), checked for status, content type and schema.

Valid data may still be refused by rules JSON Schema cannot state (a resume above its stop,
a stop above the queue's maximum, a webhook target the policy refuses): the document says
so in words, and a 422 for such a request counts only when the rule really applies.
`/events` (an endless stream) is left out; long-poll waits are cut to a few milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events, from_schema
from schemathesis.specs.openapi.checks import (
    RejectedPositiveData,
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.answers import Answers
from api.edge.protocol import MAX_WAIT
from api.main import Sidecar, build
from api.queue_selection import BadSelection, Selection
from api.routes.webhooks import WebhookIn
from api.schemas import DefaultsIn
from api.vhost_schemas import VhostDefaultsIn
from sidecar.config import Settings
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.thresholds import validate_settings
from sidecar.flow.vhost_quota import quota_problems
from sidecar.name_patterns import PatternError, encoded, pattern_test
from sidecar.signals.exchange_routing import Binding, Topology
from sidecar.signals.webhook_signing import secret_key
from sidecar.signals.webhook_targets import TargetPolicy
from tests.api.conftest import ScriptedBroker

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEED = 20261122
ENGINE_CONFIG = f"""
seed = {SEED}
[cache]
enabled = false  # nothing written to the checkout; every run the same
[[project]]
title = "flow-sidecar"
[project.generation]
max-examples = 80
mode = "all"
[project.checks]
enabled = true
[project.phases.stateful]
enabled = false
[project.headers]
Authorization = "Bearer {TOKEN}"
"""
MIN_CASES = 1200  # a run that sends fewer requests than this did not really run
KNOWN_EXAMPLES = 30  # per route, with real objects
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
WAIT = 0.005  # seconds a long-poll may park

# Requests that reach real objects: each operation is also called with these path
# parameters and, for writes, this body. (Not vhost "/": path parameters go in unencoded.)
KNOWN = {"vhost": "v1", "queue": "orders", "exchange": "ex", "asset": "dashboard.js",
         "producer_id": "p1"}
BODIES = {
    "PUT /queues/{vhost}/{queue}/flow": {"qpid.flow_stop_count": 950},
    "PUT /defaults": {"defaultFlowStopThreshold": 80, "defaultFlowResumeThreshold": 70,
                      "defaultQueueLimit": 104857600},
    "POST /webhooks": {"url": "http://127.0.0.1:9/other", "secret": "t" * 20},
    "PUT /vhosts/{vhost}/quota": {"overfullSize": 50, "underfullSize": 40},
    "PUT /vhosts/{vhost}/defaults": {"capacity": 10485760, "flowResumeCapacity": 8388608},
    "POST /grants/{vhost}/{queue}": {"messages": 5, "bytes": 500},
    "POST /grants/exchange/{vhost}/{exchange}": {"messages": 5},
    "POST /grants/release": {"grants": [{"grantId": "never-granted", "usedMessages": 0}]},
}


def sidecar_with_queues(data_dir: Path) -> Sidecar:
    """A sidecar with a token that has polled a broker with a few queues, an exchange, a
    disk alarm and a webhook. It answers the Host the ASGI test client sends (`testserver`);
    loopback webhook targets are allowed, as in every test here; nothing goes stale mid-run."""
    broker = ScriptedBroker()
    broker.queue("orders", 901, 1200, arguments={"qpid.flow_stop_count": 900})
    broker.queue("orders", 10, 100, vhost="v1")
    broker.queue("a/b", None, None)
    broker.queue("ring", 3, 30, arguments={"x-max-length": 10})
    broker.topology = Topology.build({("v1", "ex"): "direct"},
                                     [Binding("v1", "ex", "orders", "queue", "k")])
    broker.nodes = {"rabbit@a": NodeStatus(memory=False, disk=True)}  # every queue stopped
    sidecar = build(Settings(data_dir=data_dir, token=TOKEN, allowed_hosts="testserver",
                             webhook_allow_private=True, stale_after=3600), broker)
    asyncio.run(sidecar.runtime.poller.poll_once())
    sidecar.runtime.delivery.transport = lambda *_: 204  # the fuzzer's URLs get no traffic
    new_webhook(sidecar)
    return sidecar


def new_webhook(sidecar: Sidecar) -> str:
    """A subscription's id, made before the app runs (afterwards the store belongs to the
    app's event-loop thread: see `webhook_through_api`)."""
    return sidecar.runtime.outbox.create(url="http://127.0.0.1:9/hook", secret="s" * 20,
                                         vhost="*", queue="*").id


def webhook_through_api(schema: Any) -> str:
    """A fresh subscription's id (one per operation: DELETE /webhooks/{sub_id} removes one),
    made by a request: once the fuzzer started the app's lifespan, its poller and webhook
    delivery use the store from the fuzzer's event-loop thread, never from this one."""
    response = schema["/webhooks"]["POST"].Case(
        body={"url": "http://127.0.0.1:9/hook", "secret": "s" * 20}).call(headers=AUTH)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    """One per test: the engine runs the app's lifespan, whose end closes the store."""
    made = sidecar_with_queues(tmp_path)
    yield made
    made.runtime.recorder.close()
    made.store.close()


# The default exchange's real name "" as an empty last segment: the same handler as
# /flow/exchange/{vhost}/{exchange}, which the engine fuzzes; the engine itself cannot
# generate for a path that ends in "/" (it filters out every example) and reads a
# header-less GET of it as schema-violating (tests/api/test_names.py covers the route).
EMPTY_EXCHANGE = "/flow/exchange/{vhost}/"


def refused_by_a_stated_rule(sidecar: Sidecar, case: schemathesis.Case) -> bool:
    """True when the case's body breaks a rule the document states in words but JSON
    Schema cannot: checked with the sidecar's own rules, not by reading the answer."""
    body: Any = case.body
    if not isinstance(body, dict):
        return False
    label = case.operation.label
    if label == "PUT /queues/{vhost}/{queue}/flow":
        values = {k if k.startswith("qpid.") else "qpid." + k: v for k, v in body.items()
                  if v is not None}
        entry = sidecar.runtime.engine.entry((case.path_parameters["vhost"],
                                              case.path_parameters["queue"]))
        return bool(validate_settings(values, entry.limits if entry else None,
                                      sidecar.runtime.engine.defaults))
    if label == "PUT /defaults":
        return bool(DefaultsIn.model_validate(body).policy().problems())
    if label == "PUT /vhosts/{vhost}/defaults":  # a vhost's defaults: the value rules
        values = VhostDefaultsIn.model_validate(body).values()
        return bool(validate_settings(values, None, sidecar.runtime.engine.defaults))
    if label == "POST /webhooks":
        try:
            hook = WebhookIn.model_validate(body)
            secret_key(hook.secret.get_secret_value())
        except ValueError:
            return True
        return TargetPolicy(allow_private=True).url_problem(hook.url) is not None
    if label == "PUT /vhosts/{vhost}/quota":
        ours = {"storeOverfullSize": "overfullSize", "storeUnderfullSize": "underfullSize"}
        return bool(quota_problems({ours.get(k, k): v for k, v in body.items()
                                    if v is not None}))
    if label == "POST /grants/{vhost}/{queue}":  # `bytes` is required where size is watched
        key = (case.path_parameters["vhost"], case.path_parameters["queue"])
        nbytes = body.get("bytes")
        return sidecar.runtime.grants.bytes_problem([key], nbytes) is not None
    return False


def refused_name(response: Any) -> bool:
    """A 400 for a name no broker object can have (over 255 bytes of UTF-8, CR or LF):
    byte lengths and RabbitMQ's name rules are stated in words, not in JSON Schema."""
    detail = str(response.json().get("detail", "")) if response.status_code == 400 else ""
    return "bytes of UTF-8" in detail or "contains CR or LF" in detail


def refused_selection(sidecar: Sidecar, case: schemathesis.Case, response: Any) -> bool:
    """A 400 for a listing whose `name` is no regular expression or whose `page` is after
    the last: checked by selecting with the sidecar's own rules."""
    if response.status_code != 400 or case.operation.path not in ("/queues",
                                                                   "/queues/history"):
        return False
    query = case.query or {}
    try:
        selection = Selection(name=query.get("name"),
                              use_regex=str(query.get("use_regex")).lower() == "true",
                              vhost=query.get("vhost"),
                              page=None if query.get("page") is None else int(query["page"]),
                              page_size=int(query.get("page_size", 100)))
    except (TypeError, ValueError):
        return False
    try:
        answers = Answers(sidecar.runtime.engine, sidecar.runtime.producers)
        rows = answers.rows_of(answers.engine.entries()) + answers.waiting_rows()
        passing: set[str] = set()
        if selection.pattern is not None:
            test = pattern_test(*selection.pattern)
            passing = {r.key[1] for r in rows if test(encoded(r.key[1]))}
        selection.page_of([selection.run(rows, passing)])
    except (BadSelection, PatternError):
        return True
    return False


#: Routes whose only parameter is a vhost name, which may be any string
ONLY_A_VHOST = {"GET /vhosts/{vhost}", "DELETE /vhosts/{vhost}/quota",
                "DELETE /vhosts/{vhost}/defaults"}


def test_every_check_holds(sidecar: Sidecar) -> None:
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", sidecar.asgi, config=SchemathesisConfig.from_str(ENGINE_CONFIG),
    ).exclude(path="/events").exclude(path=EMPTY_EXCHANGE)

    @schema.hook
    def map_case(context: Any, case: schemathesis.Case) -> schemathesis.Case:
        wait = (case.query or {}).get("wait")
        if isinstance(wait, (int, float)) and not isinstance(wait, bool) \
                and WAIT < wait <= MAX_WAIT:
            case.query["wait"] = WAIT  # still valid, only shorter
        if isinstance(case.body, dict) and isinstance(case.body.get("wait"), (int, float)) \
                and not isinstance(case.body["wait"], bool) and case.body["wait"] > WAIT:
            case.body["wait"] = WAIT  # grants wait in the body
        return case

    @schema.hook
    def filter_failure(context: Any, failure: Any, case: schemathesis.Case,
                       response: Any) -> bool:
        return not (isinstance(failure, RejectedPositiveData) and (
            (response.status_code == 422 and refused_by_a_stated_rule(sidecar, case))
            or refused_name(response) or refused_selection(sidecar, case, response)))

    started = time.monotonic()
    checked = 0
    cases: set[str] = set()
    failures: dict[tuple[str, str], str] = {}
    for event in from_schema(schema).execute():
        if isinstance(event, (events.FatalError, events.NonFatalError)):
            text = str(getattr(event, "exception", None) or getattr(event, "value", ""))
            label = str(getattr(event, "label", "?"))
            # a route whose only parameter is any vhost name (DELETE /vhosts/{vhost}/quota,
            # GET /vhosts/{vhost}, ...) has no schema-violating request to make, and the
            # engine may give up looking for one: that is the engine's limit, not ours
            if not (label in ONLY_A_VHOST and text.startswith(
                    "Too many generated examples are filtered out")):
                failures[("engine", label)] = text[:2000]
        if not isinstance(event, events.ScenarioFinished):
            continue
        for case_id, results in event.recorder.checks.items():
            for result in results:
                checked += 1
                cases.add(case_id)
                if result.failure_info is None:
                    continue
                exchange = event.recorder.interactions.get(case_id)
                request = f"{exchange.request.method} {exchange.request.uri} " \
                          f"{(exchange.request.body or b'')[:300]!r}" if exchange else ""
                answer = f"{exchange.response.status_code} " \
                         f"{(exchange.response.content or b'')[:300]!r}" \
                    if exchange and exchange.response else ""
                failures.setdefault((event.recorder.label, result.name), (
                    f"{result.failure_info.failure}"[:1500] + f"\n  {request}\n  -> {answer}"))
    elapsed = time.monotonic() - started
    print(f"\nschemathesis: {len(cases)} cases, {checked} checks, {len(schema)} operations, "
          f"{elapsed:.1f} s")
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in sorted(failures.items()))
    assert len(cases) >= MIN_CASES, len(cases)  # its duration is printed, not asserted: load moves it


def generated_on(operation: Any, path_parameters: dict[str, str]) -> Callable[[], None]:
    """Generated requests to `operation`, always on these (existing) path parameters."""

    @given(case=operation.as_strategy())
    @settings(max_examples=KNOWN_EXAMPLES, derandomize=True, deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        case.path_parameters = {**(case.path_parameters or {}), **path_parameters}
        if case.query and "wait" in case.query:
            case.query["wait"] = WAIT
        if isinstance(case.body, dict) and "wait" in case.body:  # grants wait in the body
            case.body["wait"] = WAIT
        case.call_and_validate(checks=CHECKS, headers=AUTH)

    return check


def test_real_objects_answer_as_documented(sidecar: Sidecar) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", sidecar.asgi).exclude(
        path="/events")
    failures: dict[str, str] = {}
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        tried += 1
        path_parameters = {k: v for k, v in KNOWN.items() if f"{{{k}}}" in operation.path}
        if "{sub_id}" in operation.path:
            path_parameters["sub_id"] = webhook_through_api(schema)

        try:
            known = operation.Case(
                path_parameters=path_parameters,
                **({"body": BODIES[operation.label]} if operation.label in BODIES else {}))
            response = known.call_and_validate(checks=CHECKS, headers=AUTH)
            assert response.status_code < 300, (operation.label, response.text)
            generated_on(operation, path_parameters)()
        except Exception as exc:  # noqa: BLE001 (report every route's failure, not the first)
            failures[operation.label] = f"{type(exc).__name__}: {exc}"[:2000]
    assert tried >= 15, tried
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in failures.items())
