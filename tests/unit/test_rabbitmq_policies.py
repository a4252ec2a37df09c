"""Effective policies worked out from the policy lists agree with what RabbitMQ 4.3.6
itself reports (`effective_policy_definition`, captured with statistics on, in
tests/unit/recorded/rabbitmq43_policies.json: per-type `apply-to`, priorities, and an
operator policy whose smaller max-length wins)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sidecar.broker.rabbitmq_policies import effective_definition

CAPTURED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "recorded" / "rabbitmq43_policies.json").read_text())


@pytest.mark.parametrize("queue", CAPTURED["queues"], ids=lambda q: q["name"])
@pytest.mark.parametrize("named", [True, False], ids=["policy named", "policy matched"])
def test_effective_definition_is_the_brokers(queue: dict[str, Any], named: bool) -> None:
    assert effective_definition(
        queue["vhost"], queue["name"], queue["type"], queue["policy"] if named else None,
        CAPTURED["policies"], CAPTURED["operator_policies"],
    ) == queue["effective_policy_definition"]


def test_a_pattern_python_cannot_read_and_another_vhost_apply_to_nothing() -> None:
    policies = [{"vhost": "/", "name": "bad", "pattern": "(", "apply-to": "queues",
                 "definition": {"max-length": 1}, "priority": 9},
                {"vhost": "v", "name": "elsewhere", "pattern": ".*", "apply-to": "all",
                 "definition": {"max-length": 2}, "priority": 0}]
    assert effective_definition("/", "q", "classic", None, policies, []) == {}
