"""Differential runs: one sequence of enqueues and dequeues on a real qpidd, and the same
depths through our pure functions, side by side after every step.

Two sets of our rules are compared with qpidd:
- the contract (`thresholds.validate_settings` and `thresholds.resolve`, SPEC §3), which is
  what the sidecar applies where it runs the machine itself (RabbitMQ);
- qpidd's own rules (`qpidd_rules.qpidd_resolution`), which the Qpid C++ adapter uses to
  show the thresholds qpidd applies.
Both feed our one state machine (`state_machine.step`) with the depth qpidd reports after
each step (`msgDepth`, and `byteDepth`, which counts headers too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sidecar.broker.qmf import QmfRefused
from sidecar.broker.qpid_cpp import refusal_text
from sidecar.flow.qpidd_rules import qpidd_resolution
from sidecar.flow.queue_limits import qpid_limits
from sidecar.flow.state_machine import Depth, FlowState, step
from sidecar.flow.thresholds import FLOW_KEYS, DefaultPolicy, Resolution, resolve, validate_settings
from tests.utils.qpid_traffic import Observed, QueueUnderTest, Traffic

Op = tuple[str, int]  # ("enq", size in bytes as qpidd counts them) or ("deq", 0)


def enq(*sizes: int) -> list[Op]:
    """Enqueue one message of each size."""
    return [("enq", size) for size in sizes]


def deq(count: int = 1) -> list[Op]:
    """Dequeue the `count` oldest messages."""
    return [("deq", 0)] * count


@dataclass(frozen=True)
class Ours:
    """What our functions make of a queue's declare arguments under a broker's options."""

    contract: Resolution
    contract_refusal: str | None
    rules: Resolution
    rules_refusal: str | None


def ours(arguments: Mapping[str, Any], policy: DefaultPolicy) -> Ours:
    """Our thresholds and refusals, by the contract and by qpidd's rules."""
    limits = qpid_limits(arguments)
    flow = {k: v for k, v in arguments.items() if k in FLOW_KEYS}
    problems = validate_settings(flow, limits, policy)
    rules = qpidd_resolution(arguments, limits, policy)
    return Ours(
        contract=resolve(None, arguments, limits, policy),
        contract_refusal=problems[0].message if problems else None,
        rules=rules,
        rules_refusal=rules.errors[0] if rules.errors else None,
    )


@dataclass(frozen=True)
class StepSeen:
    """One step: what was done, what qpidd reports, the state of each of our machines."""

    op: Op
    broker: Observed
    contract: FlowState
    rules: FlowState

    def agrees(self, which: str) -> bool:
        """flowStopped and flowStoppedCount equal between qpidd and our machine."""
        state: FlowState = getattr(self, which)
        return (self.broker.stopped, self.broker.stopped_count) == (
            state.stopped, state.stopped_count)


@dataclass
class Run:
    """A whole differential run of one queue."""

    ours: Ours
    broker_refusal: str | None
    steps: list[StepSeen] = field(default_factory=list)

    def disagreements(self, which: str) -> list[StepSeen]:
        """The steps where `which` ("contract" or "rules") differs from qpidd."""
        return [s for s in self.steps if not s.agrees(which)]

    def trace(self) -> str:
        """Every step, for assertion messages."""
        return "\n".join(
            f"{i:3} {s.op[0]} {s.op[1]:5} -> qpidd {s.broker.messages} msgs "
            f"{s.broker.bytes} B stopped={s.broker.stopped} count={s.broker.stopped_count}"
            f" | contract {s.contract.stopped}/{s.contract.stopped_count}"
            f" | rules {s.rules.stopped}/{s.rules.stopped_count}"
            for i, s in enumerate(self.steps))


def declare(traffic: Traffic, name: str, arguments: Mapping[str, Any]) -> str | None:
    """Create the queue on qpidd; its refusal (as our refusals read), or None."""
    try:
        traffic.broker.console.call("create", {"type": "queue", "name": name, "strict": True,
                                               "properties": dict(arguments)})
    except QmfRefused as exc:
        return refusal_text(exc.text)
    return None


def replay(traffic: Traffic, name: str, arguments: Mapping[str, Any], ops: Sequence[Op],
           policy: DefaultPolicy) -> Run:
    """Declare `name` with `arguments` on qpidd, run `ops` on it and through our machines,
    delete it. `policy` must be the broker's --default-flow-* and --default-queue-limit."""
    run = Run(ours(arguments, policy), declare(traffic, name, arguments))
    if run.broker_refusal is not None:
        return run
    ring = qpid_limits(arguments)
    queue = QueueUnderTest(traffic, name)
    contract = rules = FlowState()
    try:
        for op in ops:
            if op[0] == "enq":
                seen = queue.enqueue(op[1], max_count=ring.max_length if ring.ring else None)
            else:
                seen = queue.dequeue()
            depth = Depth(seen.messages, seen.bytes)
            contract, _ = step(contract, depth, run.ours.contract.thresholds)
            rules, _ = step(rules, depth, run.ours.rules.thresholds)
            run.steps.append(StepSeen(op, seen, contract, rules))
    finally:
        traffic.forget(name)
        traffic.broker.console.call("delete", {"type": "queue", "name": name,
                                               "options": {"if_empty": False}})
    return run
