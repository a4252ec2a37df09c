"""qpidd's own threshold rules (what the Qpid C++ adapter shows), from tables. Each row is
a behaviour tests/qpid/ saw on a real qpidd; these pin it without one."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.flow.qpidd_rules import qpidd_resolution
from sidecar.flow.queue_limits import QPID_NAMES, QueueLimits, qpid_limits
from sidecar.flow.thresholds import DefaultPolicy, Level, Source

QPIDD = DefaultPolicy()  # qpidd's defaults: 80 %, 70 %, 100 MiB
DEFAULT_SIZE = Level(83886080, 73400320)


@pytest.mark.parametrize(("arguments", "policy", "count", "size", "sources"), [
    # defaults: stop rounded, resume truncated, both in double precision
    ({"qpid.max_count": 10}, QPIDD, Level(8, 7), DEFAULT_SIZE, ("default", "default")),
    ({"qpid.max_count": 90}, QPIDD, Level(72, 62), DEFAULT_SIZE, ("default", "default")),
    ({"qpid.max_count": 100}, DefaultPolicy(80, 57), Level(80, 56), Level(83886080, 59768831),
     ("default", "default")),
    ({}, DefaultPolicy(90, 75, 2000), None, Level(1800, 1500), ("none", "default")),
    # an explicit qpid.max_size of 0 is no limit, and no default either
    ({"qpid.max_size": 0, "qpid.flow_stop_count": 5}, QPIDD, Level(5, 5), None,
     ("arguments", "none")),
    # an unset resume keeps the pre-filled default resume (not the stop)
    ({"qpid.max_count": 20, "qpid.flow_stop_count": 16}, QPIDD, Level(16, 14), DEFAULT_SIZE,
     ("arguments", "default")),
    # a resume 0 is the stop
    ({"qpid.max_count": 20, "qpid.flow_stop_count": 16, "qpid.flow_resume_count": 0}, QPIDD,
     Level(16, 16), DEFAULT_SIZE, ("arguments", "default")),
    # a resume without stop overrides the default resume
    ({"qpid.max_count": 20, "qpid.flow_resume_count": 5}, QPIDD, Level(16, 5), DEFAULT_SIZE,
     ("default", "default")),
    # both default percentages 0: only explicit values
    ({"qpid.max_count": 20}, DefaultPolicy(0, 0), None, None, ("none", "none")),
    ({"qpid.flow_stop_count": 3}, DefaultPolicy(0, 0), Level(3, 3), None, ("arguments", "none")),
    # decimal strings, as qpidd's Variant converts them (what UIs declare)
    ({"qpid.flow_stop_count": "5", "qpid.flow_resume_count": "3"}, QPIDD, Level(5, 3),
     DEFAULT_SIZE, ("arguments", "default")),
    ({"qpid.max_count": "10", "qpid.flow_stop_size": "100000000"}, QPIDD, Level(8, 7),
     Level(100000000, 73400320), ("default", "arguments")),
    # what qpidd cannot convert cannot have been declared: read as not given
    ({"qpid.flow_stop_count": "5.0", "qpid.max_count": 2**32}, QPIDD, None, DEFAULT_SIZE,
     ("disabled", "default")),
    # stops of 0 switch a dimension off
    ({"qpid.max_count": 20, "qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0}, QPIDD,
     None, None, ("disabled", "disabled")),
])
def test_thresholds(arguments: dict[str, Any], policy: DefaultPolicy, count: Level | None,
                    size: Level | None, sources: tuple[str, str]) -> None:
    r = qpidd_resolution(arguments, qpid_limits(arguments), policy)
    assert (r.thresholds.count, r.thresholds.size) == (count, size)
    assert (r.count_source, r.size_source) == tuple(Source(s) for s in sources)
    assert r.errors == ()


@pytest.mark.parametrize(("arguments", "refusal"), [
    ({"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 10},
     "qpid.flow_resume_count=10 must be less or equal to qpid.flow_stop_count=5"),
    ({"qpid.flow_stop_size": 1000},  # the pre-filled resume (70 % of 100 MiB) is above it
     "qpid.flow_resume_size=73400320 must be less or equal to qpid.flow_stop_size=1000"),
    ({"qpid.max_count": 100, "qpid.flow_stop_count": 200},
     "qpid.flow_stop_count=200 must be less than qpid.max_count=100"),
    ({"qpid.flow_stop_size": 200000000},
     "qpid.flow_stop_size=200000000 must be less than qpid.max_size=104857600"),
    # the count is checked first, and only the first problem is told
    ({"qpid.max_count": 20, "qpid.flow_stop_count": 10, "qpid.flow_stop_size": 1000},
     "qpid.flow_resume_count=14 must be less or equal to qpid.flow_stop_count=10"),
])
def test_refusals_in_qpidds_words(arguments: dict[str, Any], refusal: str) -> None:
    r = qpidd_resolution(arguments, qpid_limits(arguments), QPIDD)
    assert r.errors == (refusal,)
    assert not r.thresholds.enabled


def test_ring_queues_get_no_flow_control_at_all() -> None:
    arguments = {"qpid.max_count": 10, "qpid.policy_type": "ring", "qpid.flow_stop_count": 3}
    r = qpidd_resolution(arguments, qpid_limits(arguments), QPIDD)
    assert not r.thresholds.enabled
    assert r.warnings == (("qpid.flow_stop_count ignored: qpidd applies no flow control to "
                           "a ring queue"),)


def test_a_stop_of_0_with_a_prefilled_resume_is_warned_about() -> None:
    arguments = {"qpid.max_size": 1000, "qpid.flow_stop_count": 3, "qpid.flow_stop_size": 0}
    r = qpidd_resolution(arguments, qpid_limits(arguments), QPIDD)
    assert (r.thresholds.count, r.thresholds.size) == (Level(3, 3), None)
    assert "qpid.flow_resume_size=700 still holds flow on" in r.warnings[0]


def test_qpid_limits_from_arguments() -> None:
    assert qpid_limits({"qpid.max_count": 5, "qpid.max_size": 0}) == QueueLimits(
        5, 0, "reject", QPID_NAMES)
    ring = qpid_limits({"qpid.policy_type": "ring"})
    assert ring.ring and ring.as_json()["ring"] is True
    assert not qpid_limits({"qpid.max_count": 5}).ring
