"""The vhost quota rules (pure): validation in Qpid's words, the levels a quota sets, vhost
totals, MST-1008/1009 lines, and the hysteresis as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.state_machine import Depth, EventKind, FlowEvent, FlowState, step
from sidecar.flow.thresholds import Level, Thresholds
from sidecar.flow.vhost_quota import quota_problems, quota_thresholds, vhost_depths
from sidecar.records.log_lines import store_line


@pytest.mark.parametrize(("values", "key", "message"), [
    ({"overfullSize": -1}, "overfullSize", "overfullSize=-1 must be an integer >= 0"),
    ({"overfullSize": 500, "underfullSize": -5}, "underfullSize",
     "underfullSize=-5 must be an integer >= 0"),
    ({"overfullSize": 500, "underfullSize": 600}, "underfullSize",
     "underfullSize=600 must be less or equal to overfullSize=500"),
    ({"overfullMessages": 10, "underfullMessages": 11}, "underfullMessages",
     "underfullMessages=11 must be less or equal to overfullMessages=10"),
    ({"underfullSize": 100}, "underfullSize", "underfullSize=100 needs overfullSize"),
    ({"overfullSize": "x5"}, "overfullSize", "overfullSize must be an integer >= 0"),
    ({"overfullSize": True}, "overfullSize", "must be an integer"),
    ({}, "overfullSize", "a quota needs overfullSize or overfullMessages above 0"),
    ({"overfullSize": 0, "overfullMessages": 0}, "overfullSize", "a quota needs"),
])
def test_refused_quotas_name_the_key(values: dict[str, object], key: str,
                                     message: str) -> None:
    problems = quota_problems(values)
    assert problems and problems[0].key == key and message in problems[0].message


@pytest.mark.parametrize(("values", "size", "count"), [
    ({"overfullSize": 500}, Level(500, 500), None),  # Broker-J: underfull unset = overfull
    ({"overfullSize": 500, "underfullSize": 0}, Level(500, 500), None),
    ({"overfullSize": 500, "underfullSize": 400}, Level(500, 400), None),
    ({"overfullMessages": 9, "underfullMessages": 3}, None, Level(9, 3)),
    ({"overfullSize": 0, "overfullMessages": 9}, None, Level(9, 9)),  # 0: no size limit
    ({"overfullSize": 5, "underfullSize": 6}, None, None),  # invalid: watches nothing
])
def test_quota_levels(values: dict[str, int], size: Level | None,
                      count: Level | None) -> None:
    assert quota_thresholds(values) == Thresholds(count=count, size=size)
    if size or count:
        assert quota_problems(values) == []


def test_vhost_totals_sum_queues_and_list_empty_vhosts() -> None:
    totals = vhost_depths([("/", Depth(2, 20)), ("a", None), ("/", Depth(3, 30)),
                           ("b", Depth(1, 1))])
    assert totals == {"/": Depth(5, 50), "a": Depth(0, 0), "b": Depth(1, 1)}


def test_mst_lines_keep_broker_j_wording() -> None:
    quota = Thresholds(size=Level(50_000_000, 45_000_000))
    over = store_line("/test", FlowEvent(EventKind.OVERFULL, Depth(10, 50_000_001), quota, 1))
    assert over.startswith("[vh(/test)/ms(queues)] MST-1008 : Store overfull, flow control "
                           "will be enforced (Size : 50,000,001 bytes, Overfull Size : "
                           "50,000,000, Messages : 10)")
    under = store_line("/test", FlowEvent(EventKind.UNDERFULL, Depth(1, 10), quota, 1),
                       "quota removed")
    assert under.startswith("[vh(/test)/ms(queues)] MST-1009 : Store overfull condition "
                            "cleared (Size : 10 bytes, Underfull Size : 45,000,000, Messages : 1")
    both = Thresholds(count=Level(100, 90), size=Level(5_000, 4_000))
    assert store_line("/", FlowEvent(EventKind.OVERFULL, Depth(101, 10), both, 1)).endswith(
        "(Size : 10 bytes, Overfull Size : 5,000, Messages : 101, Overfull Messages : 100)")
    assert under.endswith(", quota removed)")


quotas = st.fixed_dictionaries({}, optional={
    "overfullSize": st.integers(1, 1000), "underfullSize": st.integers(0, 1000),
    "overfullMessages": st.integers(1, 100), "underfullMessages": st.integers(0, 100),
}).filter(lambda q: not quota_problems(q))
depths = st.builds(Depth, st.integers(0, 120), st.integers(0, 1200))


@given(quotas, st.lists(depths, max_size=30))
def test_quota_hysteresis(quota: dict[str, int], samples: list[Depth]) -> None:
    """Above any overfull level: overfull; below every underfull level: not; in between:
    as before. The counter counts OFF -> ON only."""
    size, count = quota.get("overfullSize"), quota.get("overfullMessages")
    low_size = quota.get("underfullSize") or size
    low_count = quota.get("underfullMessages") or count
    state = FlowState()
    for depth in samples:
        before = state
        state, events = step(state, depth, quota_thresholds(quota))
        above = (size is not None and depth.bytes > size) or (
            count is not None and depth.messages > count)
        below = (low_size is None or depth.bytes < low_size) and (
            low_count is None or depth.messages < low_count)
        if above:
            assert state.stopped
        elif below:
            assert not state.stopped
        else:
            assert state.stopped == before.stopped
        assert state.stopped_count == before.stopped_count + (
            1 if state.stopped and not before.stopped else 0)
        assert len(events) == int(state.stopped != before.stopped)
