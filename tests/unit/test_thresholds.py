"""Threshold resolution and Qpid's validation rules, one table row per rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.queue_limits import QueueLimits
from sidecar.flow.thresholds import (
    MAX_VALUE,
    DefaultPolicy,
    Level,
    Source,
    default_level,
    resolve,
    validate_settings,
)

RP = "reject-publish"
POLICY = DefaultPolicy()
NO_DEFAULT_BYTES = DefaultPolicy(queue_limit=0)


@pytest.mark.parametrize(
    ("values", "limits", "messages"),
    [
        ({"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500}, None, []),
        ({"qpid.flow_stop_count": 500, "qpid.flow_resume_count": 600}, None,
         ["qpid.flow_resume_count=600 must be less or equal to qpid.flow_stop_count=500"]),
        ({"qpid.flow_stop_size": 100, "qpid.flow_resume_size": 101}, None,
         ["qpid.flow_resume_size=101 must be less or equal to qpid.flow_stop_size=100"]),
        ({"qpid.flow_stop_count": -1}, None,
         ["qpid.flow_stop_count=-1 must be an integer >= 0"]),
        ({"qpid.flow_stop_count": 9.5}, None,
         ["qpid.flow_stop_count must be an integer >= 0, got 9.5"]),
        # decimal strings are integers (the management UI declares arguments as strings)
        ({"qpid.flow_stop_count": "900", "qpid.flow_resume_count": "0500"}, None, []),
        ({"qpid.flow_stop_count": "500", "qpid.flow_resume_count": "600"}, None,
         ["qpid.flow_resume_count=600 must be less or equal to qpid.flow_stop_count=500"]),
        ({"qpid.flow_stop_count": "-1"}, None,
         ["qpid.flow_stop_count must be an integer >= 0, got '-1'"]),
        *(({"qpid.flow_stop_size": text}, None,
           [f"qpid.flow_stop_size must be an integer >= 0, got {text!r}"])
          for text in ("", " 900", "900 ", "+900", "9.5", "1e3", "0x10", "\u0663", "ten")),
        ({"qpid.flow_stop_count": str(MAX_VALUE + 1)}, None,
         [f"qpid.flow_stop_count={MAX_VALUE + 1} must be at most {MAX_VALUE}"]),
        ({"qpid.flow_stop_count": True}, None,
         ["qpid.flow_stop_count must be an integer >= 0, got True"]),
        ({"qpid.flow_stop_count": MAX_VALUE + 1}, None,
         [f"qpid.flow_stop_count={MAX_VALUE + 1} must be at most {MAX_VALUE}"]),
        # a stop above the queue's maximum in that dimension
        ({"qpid.flow_stop_count": 1001}, QueueLimits(1000, None, RP),
         ["qpid.flow_stop_count=1001 must be less than max-length=1000"]),
        ({"qpid.flow_stop_count": 1000}, QueueLimits(1000, None, RP), []),
        ({"qpid.flow_stop_size": 5000}, QueueLimits(None, 4096, RP),
         ["qpid.flow_stop_size=5000 must be less than max-length-bytes=4096"]),
        ({"qpid.flow_stop_size": 104857601}, QueueLimits(),
         ["qpid.flow_stop_size=104857601 must be less than --default-queue-limit=104857600"]),
        # the maximum is unknown until the queue exists: only value rules apply
        ({"qpid.flow_stop_size": 10**12}, None, []),
        # resume without stop is ignored (a warning in resolution), not refused
        ({"qpid.flow_resume_count": 5}, None, []),
        # zeros disable; resume 0 means resume = stop
        ({"qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0}, None, []),
        ({"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 0}, None, []),
    ],
)
def test_validation(values: dict, limits: QueueLimits | None, messages: list[str]) -> None:
    assert [p.message for p in validate_settings(values, limits, POLICY)] == messages


def test_validation_names_the_offending_key() -> None:
    problems = validate_settings({"qpid.flow_stop_count": 5, "qpid.flow_resume_count": 6,
                                  "qpid.flow_stop_size": -2}, None, POLICY)
    assert {p.key for p in problems} == {"qpid.flow_resume_count", "qpid.flow_stop_size"}


@pytest.mark.parametrize(
    ("limit", "policy", "expected"),
    [
        (1000, DefaultPolicy(80, 70), Level(800, 700)),
        (10000, DefaultPolicy(90, 75), Level(9000, 7500)),  # the seed's qpidd example
        (104857600, DefaultPolicy(), Level(83886080, 73400320)),
        (7, DefaultPolicy(50, 50), Level(4, 3)),  # 3.5 rounds half up; resume floors
        (3, DefaultPolicy(50, 10), Level(2, 2)),  # resume floors to 0: = stop
        (1, DefaultPolicy(40, 0), None),  # stop rounds to 0: nothing to watch
        (10, DefaultPolicy(80, 0), Level(8, 8)),  # resume 0% means resume = stop
        (1000, DefaultPolicy(0, 0), None),  # both 0: default flow control disabled
        (None, DefaultPolicy(), None),
        (0, DefaultPolicy(), None),
    ],
)
def test_default_levels(limit: int | None, policy: DefaultPolicy, expected: Level | None) -> None:
    assert default_level(limit, policy) == expected


@given(st.integers(1, 10**12), st.integers(0, 100), st.integers(0, 100))
def test_default_level_is_ordered(limit: int, stop: int, resume: int) -> None:
    policy = DefaultPolicy(max(stop, resume), min(stop, resume))
    level = default_level(limit, policy)
    if level is not None:
        assert 0 < level.resume <= level.stop <= limit  # a resume of 0 is never reached


@pytest.mark.parametrize(
    ("policy", "problems"),
    [
        (DefaultPolicy(80, 70), []),
        (DefaultPolicy(0, 0), []),
        (DefaultPolicy(100, 100), []),
        (DefaultPolicy(101, 70), ["--default-flow-stop-threshold=101 must be at most 100"]),
        (DefaultPolicy(70, 80), ["--default-flow-resume-threshold=80 must be less or equal to "
                                 "--default-flow-stop-threshold=70"]),
        (DefaultPolicy(80, 70, -1), ["--default-queue-limit=-1 must be 0 or more"]),
    ],
)
def test_default_policy_checks(policy: DefaultPolicy, problems: list[str]) -> None:
    assert policy.problems() == problems


def test_sources_resolve_per_dimension() -> None:
    """API wins for count, arguments for size; each dimension from its own best source."""
    r = resolve({"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500},
                {"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 5000},
                QueueLimits(1000, 10000, RP), POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(900, 500), Source.API)
    assert (r.thresholds.size, r.size_source) == (Level(5000, 5000), Source.ARGUMENTS)


def test_defaults_from_max_length_on_reject_publish_queue() -> None:
    r = resolve(None, {}, QueueLimits(1000, None, RP), POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(800, 700), Source.DEFAULT)
    # the byte maximum falls back to --default-queue-limit
    assert (r.thresholds.size, r.size_source) == (Level(83886080, 73400320), Source.DEFAULT)
    r = resolve(None, {}, QueueLimits(1000, None, RP), NO_DEFAULT_BYTES)
    assert (r.thresholds.size, r.size_source) == (None, Source.NONE)


def test_ring_queue_gets_no_defaults_but_honours_explicit_settings() -> None:
    ring = QueueLimits(1000, None, "drop-head")
    r = resolve(None, {}, ring, POLICY)
    assert not r.thresholds.enabled and (r.count_source, r.size_source) == (Source.NONE,
                                                                            Source.NONE)
    r = resolve(None, {"qpid.flow_stop_count": 900}, ring, POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(900, 900), Source.ARGUMENTS)


def test_no_maximum_no_count_default() -> None:
    r = resolve(None, {}, QueueLimits(), POLICY)
    assert r.count_source is Source.NONE and r.size_source is Source.DEFAULT


def test_both_stops_zero_disable_the_queue() -> None:
    r = resolve({"qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0}, {"qpid.flow_stop_count": 5},
                QueueLimits(1000, None, RP), POLICY)
    assert not r.thresholds.enabled
    assert (r.count_source, r.size_source) == (Source.DISABLED, Source.DISABLED)


def test_bad_arguments_are_skipped_and_reported() -> None:
    r = resolve(None, {"qpid.flow_stop_count": 500, "qpid.flow_resume_count": 600},
                QueueLimits(1000, None, RP), POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(800, 700), Source.DEFAULT)
    assert r.errors == ("arguments: qpid.flow_resume_count=600 must be less or equal to "
                        "qpid.flow_stop_count=500",)


def test_stored_setting_that_exceeds_a_new_maximum_falls_back() -> None:
    r = resolve({"qpid.flow_stop_count": 2000}, {"qpid.flow_stop_count": 900},
                QueueLimits(1000, None, RP), POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(900, 900), Source.ARGUMENTS)
    assert r.errors[0] == "api: qpid.flow_stop_count=2000 must be less than max-length=1000"


def test_resume_without_stop_is_ignored_with_a_warning() -> None:
    r = resolve({"qpid.flow_resume_count": 10}, {}, QueueLimits(1000, None, RP), POLICY)
    assert r.count_source is Source.DEFAULT
    assert r.warnings == ("api: qpid.flow_resume_count=10 ignored: no qpid.flow_stop_count "
                          "is set",)


def test_disabled_defaults_leave_explicit_settings() -> None:
    r = resolve({"qpid.flow_stop_size": 100}, {}, QueueLimits(1000, None, RP),
                DefaultPolicy(0, 0))
    assert r.count_source is Source.NONE
    assert (r.thresholds.size, r.size_source) == (Level(100, 100), Source.API)


def test_string_arguments_from_the_management_ui_apply() -> None:
    """`"qpid.flow_stop_count": "10"` is what the UI declares by default: it applies."""
    r = resolve(None, {"qpid.flow_stop_count": "10", "qpid.flow_resume_count": "3",
                       "qpid.flow_stop_size": "2048"}, QueueLimits(1000, None, RP), POLICY)
    assert (r.thresholds.count, r.count_source) == (Level(10, 3), Source.ARGUMENTS)
    assert (r.thresholds.size, r.size_source) == (Level(2048, 2048), Source.ARGUMENTS)
    assert r.errors == ()
    r = resolve(None, {"qpid.flow_stop_count": "10 messages"}, QueueLimits(1000, None, RP),
                POLICY)
    assert r.count_source is Source.DEFAULT
    assert r.errors == ("arguments: qpid.flow_stop_count must be an integer >= 0, got "
                        "'10 messages'",)


@given(st.integers(0, MAX_VALUE))
def test_a_decimal_string_means_its_integer(value: int) -> None:
    as_text = resolve(None, {"qpid.flow_stop_count": str(value)}, QueueLimits(), POLICY)
    as_int = resolve(None, {"qpid.flow_stop_count": value}, QueueLimits(), POLICY)
    assert as_text == as_int
