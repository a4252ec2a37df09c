"""Differential conformance against a real qpidd: the same enqueues and dequeues on qpidd and
through our resolver and state machine, compared after every step (harness.py).

Each case hits boundaries: exactly at a stop, one above it, exactly at a resume, one below
it, in messages and in bytes (sizes as qpidd counts them), both dimensions, resume unset or
0, defaults from `qpid.max_count`, `qpid.max_size`, --default-queue-limit and the
--default-flow-* percentages, RING queues, and invalid settings.

`AGREE` cases must agree everywhere: flowStopped, flowStoppedCount and refusal texts, for
the contract and for qpidd's rules. `DIVERGE` cases are where qpidd departs from the
contract (SPEC §3); each is listed in docs/qpid.md (D1-D7) with the seed's words that
justify keeping the contract, and pinned here: qpidd's rules (what the Qpid adapter shows)
must still agree with qpidd, and the contract must differ exactly as documented.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sidecar.flow.thresholds import Level
from tests.qpid.conftest import CONFIGS
from tests.qpid.harness import Op, deq, enq, replay
from tests.utils.qpid_traffic import Traffic

SC, RC, SS, RS = ("qpid.flow_stop_count", "qpid.flow_resume_count", "qpid.flow_stop_size",
                  "qpid.flow_resume_size")
MAX_COUNT, MAX_SIZE, POLICY = "qpid.max_count", "qpid.max_size", "qpid.policy_type"
M = 100  # a message of 100 bytes as qpidd counts them


@dataclass(frozen=True)
class Case:
    """Arguments, the broker configuration, the steps, and the stopped state qpidd must
    report after each step (a string of 0/1, checked against qpidd itself)."""

    arguments: dict[str, Any]
    ops: list[Op]
    stopped: str
    config: str = "default"
    counts: tuple[int, ...] = field(default=())  # flowStoppedCount at the end, if checked


def fill(count: int, size: int = M) -> list[Op]:
    return enq(*[size] * count)


AGREE = {
    "count: at stop off, one above on, at resume on, one below off": Case(
        {SC: 5, RC: 3}, fill(5) + fill(2) + deq(4) + deq(1) + fill(4),
        "00000" "11" "1111" "0" "0001", counts=(2,)),
    "count: resume unset means resume = stop": Case(
        {SC: 4}, fill(5) + deq(2), "00001" "10"),
    "count: resume 0 means resume = stop": Case(
        {SC: 4, RC: 0}, fill(5) + deq(2), "00001" "10"),
    "size: exactly at stop stays off, the next message turns on": Case(
        {SS: 1000, RS: 600}, enq(400, 300, 300) + fill(1, 13), "000" "1"),
    "size: one byte above the stop": Case(
        {SS: 1000, RS: 600}, enq(400, 300, 301), "001"),
    "size: exactly at resume stays on, below turns off": Case(
        {SS: 1000, RS: 600}, enq(401, 300, 300) + deq(2), "001" "10"),
    "size: one byte below resume": Case(
        {SS: 1000, RS: 600}, enq(402, 300, 299) + deq(1), "001" "0"),
    "both: either stop turns on, both resumes turn off": Case(
        {SC: 4, RC: 2, SS: 1000, RS: 600},
        enq(300, 300, 401, 100) + deq(3) + fill(5, 13),
        "0011" "110" "00011", counts=(2,)),
    "defaults from qpid.max_count (80 % / 70 %)": Case(
        {MAX_COUNT: 10}, fill(9) + deq(3), "000000001" "110"),
    "decimal strings are converted as qpidd converts them": Case(
        {SC: "5", RC: "3"}, fill(5) + fill(2) + deq(4) + deq(1), "00000" "11" "1111" "0"),
    "defaults from a qpid.max_count given as a decimal string": Case(
        {MAX_COUNT: "10"}, fill(9) + deq(3), "000000001" "110"),
    "defaults from qpid.max_size": Case(
        {MAX_SIZE: 2000}, enq(200, 400, 400, 400, 200, 13) + deq(2), "000001" "10"),
    "defaults from --default-queue-limit and --default-flow-* (90 % / 75 %)": Case(
        {}, enq(300, 450, 450, 450, 150, 13) + deq(2), "000001" "10", config="custom"),
    "--default-flow-* percentages of qpid.max_count": Case(
        {MAX_COUNT: 20}, fill(19, 13) + deq(5), "0" * 18 + "1" "11110", config="custom"),
    "both default percentages 0: no default flow control": Case(
        {MAX_COUNT: 10}, fill(10), "0" * 10, config="defaults-off"),
    "both default percentages 0: explicit thresholds still apply": Case(
        {SC: 3}, fill(4) + deq(2), "0001" "10", config="defaults-off"),
    "stop count and stop size 0: disabled for the queue": Case(
        {MAX_COUNT: 10, SC: 0, SS: 0}, fill(10), "0" * 10),
    "ring queue: no default thresholds": Case(
        {MAX_COUNT: 5, POLICY: "ring"}, fill(7), "0" * 7),
}


@pytest.mark.parametrize("case", AGREE.values(), ids=AGREE.keys())
def test_agrees_with_qpidd(case: Case, qpid: Callable[[str], Traffic],
                           qname: Callable[[], str]) -> None:
    run = replay(qpid(case.config), qname(), case.arguments, case.ops, CONFIGS[case.config])
    assert run.broker_refusal is None and run.ours.contract_refusal is None
    assert "".join("1" if s.broker.stopped else "0" for s in run.steps) == case.stopped, \
        run.trace()
    assert run.disagreements("contract") == [], run.trace()
    assert run.disagreements("rules") == [], run.trace()
    assert run.ours.contract.thresholds == run.ours.rules.thresholds
    if case.counts:
        assert run.steps[-1].broker.stopped_count == case.counts[0]


REFUSED_ALIKE = {
    "resume count above stop count": {SC: 5, RC: 10},
    "resume size above stop size": {SS: 1000, RS: 2000},
    "stop count above qpid.max_count": {MAX_COUNT: 100, SC: 200},
    "stop size above qpid.max_size": {MAX_SIZE: 5000, SS: 6000, RS: 100},
    "stop size above --default-queue-limit": {SS: 200000000},
}


@pytest.mark.parametrize("arguments", REFUSED_ALIKE.values(), ids=REFUSED_ALIKE.keys())
def test_refusals_read_alike(arguments: dict[str, Any], qpid: Callable[[str], Traffic],
                             qname: Callable[[], str]) -> None:
    run = replay(qpid("default"), qname(), arguments, [], CONFIGS["default"])
    assert run.broker_refusal is not None
    assert run.ours.contract_refusal == run.broker_refusal == run.ours.rules_refusal


REFUSED_IN_OTHER_WORDS = {
    "negative": ({SC: -1}, "invalid conversion: Cannot convert from int64 to uint32",
                 "qpid.flow_stop_count=-1 must be an integer >= 0"),
    "fraction": ({SC: 5.5}, "invalid conversion: Cannot convert from double to uint32",
                 "qpid.flow_stop_count must be an integer >= 0, got 5.5"),
    "boolean": ({SC: True}, "invalid conversion: Cannot convert from bool to uint32",
                "qpid.flow_stop_count must be an integer >= 0, got True"),
}


@pytest.mark.parametrize("arguments, theirs, mine", REFUSED_IN_OTHER_WORDS.values(),
                         ids=REFUSED_IN_OTHER_WORDS.keys())
def test_bad_values_are_refused_by_both(arguments: dict[str, Any], theirs: str, mine: str,
                                        qpid: Callable[[str], Traffic],
                                        qname: Callable[[], str]) -> None:
    """qpidd's conversion errors name no setting; ours name the key (documented)."""
    run = replay(qpid("default"), qname(), arguments, [], CONFIGS["default"])
    assert (run.broker_refusal, run.ours.contract_refusal) == (theirs, mine)


# -- where qpidd departs from the contract (docs/qpid.md, D1-D7) -------------

def test_d1_unset_resume_takes_the_default_resume(qpid: Callable[[str], Traffic],
                                                  qname: Callable[[], str]) -> None:
    """qpidd pre-fills resume from the default ratio of qpid.max_count (70 % of 20 = 14);
    the contract reads an unset resume as the stop (16)."""
    run = replay(qpid("default"), qname(), {MAX_COUNT: 20, SC: 16},
                 fill(17) + deq(4), CONFIGS["default"])
    assert run.ours.rules.thresholds.count == Level(16, 14)
    assert run.ours.contract.thresholds.count == Level(16, 16)
    assert run.disagreements("rules") == [], run.trace()
    # depth 15: below the contract's resume of 16, not below qpidd's 14
    assert [s.broker.messages for s in run.disagreements("contract")] == [15, 14], run.trace()


def test_d2_a_lone_stop_below_the_default_resume_is_refused(
        qpid: Callable[[str], Traffic], qname: Callable[[], str]) -> None:
    """The same pre-filling makes qpidd refuse a stop size set alone under 70 % of the
    default queue limit; the contract takes it with resume = stop."""
    run = replay(qpid("default"), qname(), {SS: 1000}, [], CONFIGS["default"])
    assert run.broker_refusal == ("qpid.flow_resume_size=73400320 must be less or equal "
                                  "to qpid.flow_stop_size=1000")
    assert run.ours.rules_refusal == run.broker_refusal
    assert run.ours.contract_refusal is None
    assert run.ours.contract.thresholds.size == Level(1000, 1000)


def test_d3_a_resume_without_stop_is_used(qpid: Callable[[str], Traffic],
                                          qname: Callable[[], str]) -> None:
    """qpidd logs that a resume without stop is ignored, then uses it with the default
    stop; the contract ignores it (SPEC: 'resume values without any stop value are
    ignored, with a warning')."""
    run = replay(qpid("default"), qname(), {MAX_COUNT: 20, RC: 5},
                 fill(17) + deq(13), CONFIGS["default"])
    assert run.ours.rules.thresholds.count == Level(16, 5)
    assert run.ours.contract.thresholds.count == Level(16, 14)
    assert run.disagreements("rules") == [], run.trace()
    assert [s.broker.messages for s in run.disagreements("contract")] == list(
        range(13, 4, -1)), run.trace()


def test_d4_percentages_in_floating_point(qpid: Callable[[str], Traffic],
                                          qname: Callable[[], str]) -> None:
    """qpidd computes 70 % of 90 as (uint)(90 * 0.7) = 62; the contract's floor(90 × 70 /
    100) is 63."""
    run = replay(qpid("default"), qname(), {MAX_COUNT: 90}, fill(73) + deq(12),
                 CONFIGS["default"])
    assert run.ours.rules.thresholds.count == Level(72, 62)
    assert run.ours.contract.thresholds.count == Level(72, 63)
    assert run.disagreements("rules") == [], run.trace()
    assert [s.broker.messages for s in run.disagreements("contract")] == [62], run.trace()


def test_d5_ring_queues_ignore_explicit_thresholds(qpid: Callable[[str], Traffic],
                                                   qname: Callable[[], str]) -> None:
    """qpidd gives a RING queue no flow control at all; the contract (and the seed: 'do
    NOT have queue flow thresholds enabled by default') only withholds defaults."""
    run = replay(qpid("default"), qname(), {MAX_COUNT: 10, POLICY: "ring", SC: 3},
                 fill(5), CONFIGS["default"])
    assert not any(s.broker.stopped for s in run.steps)
    assert run.disagreements("rules") == [], run.trace()
    assert [s.broker.messages for s in run.disagreements("contract")] == [4, 5], run.trace()
    assert "ignored: qpidd applies no flow control to a ring queue" in \
        run.ours.rules.warnings[0]


def test_d6_a_stop_of_0_keeps_the_default_resume(qpid: Callable[[str], Traffic],
                                                 qname: Callable[[], str]) -> None:
    """A size stop of 0 leaves qpidd's pre-filled size resume (70 % of 1000) in force:
    flow resumes only below it although size never stops. Neither of our rule sets can
    express a resume without a stop; the rules warn about it (configWarnings)."""
    run = replay(qpid("default"), qname(), {MAX_SIZE: 1000, SC: 3, SS: 0},
                 enq(50, 50, 400, 400) + deq(3), CONFIGS["default"])
    assert [s.broker.stopped for s in run.steps] == [False, False, False, True,
                                                     True, True, False], run.trace()
    assert [s.broker.bytes for s in run.disagreements("contract")] == [800], run.trace()
    assert [s.broker.bytes for s in run.disagreements("rules")] == [800], run.trace()
    assert run.ours.rules.warnings == ((
        "qpid.flow_resume_size=700 still holds flow on: qpidd keeps the resume of a "
        "dimension whose stop is 0, and resumes only below it"),)


@pytest.mark.parametrize("arguments, broker_refuses, contract_refuses", [
    ({SC: "5"}, False, False),      # both convert decimal strings (what UIs declare)
    ({SC: 2**40}, True, False),     # qpidd's counts are 32-bit; the contract allows 2^63-1
], ids=["numeric string", "count above 32 bits"])
def test_d7_value_ranges(arguments: dict[str, Any], broker_refuses: bool,
                         contract_refuses: bool, qpid: Callable[[str], Traffic],
                         qname: Callable[[], str]) -> None:
    run = replay(qpid("default"), qname(), arguments, [], CONFIGS["default"])
    assert (run.broker_refusal is not None) is broker_refuses
    assert (run.ours.contract_refusal is not None) is contract_refuses


@pytest.mark.parametrize("value, qpidd_takes", [
    ("+5", True), ("05", True), ("-0", True),
    (" 5", False), ("5.0", False), ("-5", False), ("0x5", False)])
def test_d7_string_forms_read_as_qpidd_converts_them(
        value: str, qpidd_takes: bool, qpid: Callable[[str], Traffic],
        qname: Callable[[], str]) -> None:
    """qpidd converts with boost::lexical_cast: a sign, leading zeros, nothing else; a
    value it refuses cannot be on a queue, so qpidd's rules need not read it."""
    run = replay(qpid("default"), qname(), {SC: value}, [], CONFIGS["default"])
    assert (run.broker_refusal is None) is qpidd_takes, run.broker_refusal
    if qpidd_takes:
        stop = int(value)
        assert run.ours.rules.thresholds.count == (Level(stop, stop) if stop else None)
