"""Why a queue is stopped (pure): the combination rule from tables and properties, and the
broker alarm rules (reading `/api/nodes`, never clearing on missing data)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.broker_alarms import (
    NodeAlarm,
    NodeStatus,
    Resource,
    alarm_reason,
    merge,
    node_statuses,
    unlisted_alarmed,
)
from sidecar.flow.stop_reasons import (
    OWN,
    STALE_STOP,
    StoppedBy,
    StopReason,
    broker_wide_part,
    combine,
    describe_change,
)

QUOTA = StopReason(StoppedBy.VHOST_QUOTA, "vhost / store overfull (MST-1008)")
DISK = alarm_reason(NodeAlarm("rabbit@a", Resource.DISK))


@pytest.mark.parametrize(("own", "stale", "on_stale", "wide", "expected"), [
    (False, False, "hold", (), ()),
    (True, False, "hold", (), (OWN,)),
    (False, False, "hold", (QUOTA,), (QUOTA,)),
    (True, False, "go", (QUOTA, DISK), (OWN, QUOTA, DISK)),  # fresh data: on-stale unused
    (True, True, "hold", (DISK,), (OWN, DISK)),  # hold: the last known of everything
    (False, True, "stop", (), (STALE_STOP,)),
    (True, True, "stop", (DISK,), (STALE_STOP,)),
    (True, True, "go", (QUOTA, DISK), ()),  # the alarm was read from the same broker
])
def test_combine(own: bool, stale: bool, on_stale: str, wide: tuple[StopReason, ...],
                 expected: tuple[StopReason, ...]) -> None:
    assert combine(own, stale, on_stale, wide) == expected  # type: ignore[arg-type]


reasons = st.lists(st.sampled_from([QUOTA, DISK]), unique=True).map(tuple)


@given(st.booleans(), st.booleans(), st.sampled_from(["hold", "stop", "go"]), reasons)
def test_combine_properties(own: bool, stale: bool, on_stale: str,
                            wide: tuple[StopReason, ...]) -> None:
    got = combine(own, stale, on_stale, wide)  # type: ignore[arg-type]
    if stale and on_stale == "stop":
        assert got == (STALE_STOP,)
    elif stale and on_stale == "go":
        assert got == ()
    else:  # every reason alone stops, and each is named
        assert bool(got) == (own or bool(wide))
        assert broker_wide_part(got) == wide and (OWN in got) == own


def test_a_change_of_broker_wide_reasons_is_described() -> None:
    assert describe_change((), (QUOTA,)) == QUOTA.detail
    assert describe_change((QUOTA, DISK), (DISK,)) == f"cleared: {QUOTA.detail}"
    assert "disk alarm on node rabbit@a" in DISK.detail


def test_nodes_answer_is_read_leniently() -> None:
    assert node_statuses([{"name": "rabbit@a", "mem_alarm": True, "disk_free_alarm": False},
                          {"name": "rabbit@b", "running": False}, "junk", {"no": "name"}]) == {
        "rabbit@a": NodeStatus(True, False), "rabbit@b": NodeStatus(None, None, False)}
    assert node_statuses({"error": "not a list"}) is None


A_MEM, A_DISK = NodeAlarm("rabbit@a", Resource.MEMORY), NodeAlarm("rabbit@a", Resource.DISK)
B_DISK = NodeAlarm("rabbit@b", Resource.DISK)


def test_an_alarmed_node_left_out_of_a_read_is_named() -> None:
    read = {"rabbit@a": NodeStatus(False, False)}
    assert unlisted_alarmed({B_DISK}, read) == ["rabbit@b"]
    assert unlisted_alarmed({A_MEM}, read) == []


@pytest.mark.parametrize(("known", "read", "expected"), [
    (set(), {"rabbit@a": NodeStatus(True, False)}, {A_MEM}),
    ({A_MEM}, {"rabbit@a": NodeStatus(False, False)}, set()),  # cleared
    ({A_MEM, A_DISK}, {"rabbit@a": NodeStatus(None, False)}, {A_MEM}),  # unknown: kept
    # b left the list: merge drops it, but BrokerWide refuses such a read (unlisted_alarmed)
    ({B_DISK}, {"rabbit@a": NodeStatus(False, False)}, set()),
    ({B_DISK}, {"rabbit@a": NodeStatus(False, True), "rabbit@b": NodeStatus(None, None)},
     {A_DISK, B_DISK}),  # b says nothing: what was known of it stays
    ({B_DISK}, {"rabbit@a": NodeStatus(False, False), "rabbit@b": NodeStatus(None, None, False)},
     set()),  # b is down: RabbitMQ cleared its alarms itself
    ({B_DISK}, {"rabbit@b": NodeStatus(False, True, False)}, set()),  # down: flags are stale
])
def test_merge(known: set[NodeAlarm], read: dict[str, NodeStatus],
               expected: set[NodeAlarm]) -> None:
    assert merge(known, read) == expected


flags = st.one_of(st.none(), st.booleans())
statuses = st.dictionaries(st.sampled_from(["rabbit@a", "rabbit@b", "rabbit@c"]),
                           st.builds(NodeStatus, flags, flags, flags))


@given(st.lists(statuses, min_size=1, max_size=6))
def test_merge_never_flips_on_missing_data(reads: list[dict[str, NodeStatus]]) -> None:
    known: frozenset[NodeAlarm] = frozenset()
    for read in reads:
        after = merge(known, read)
        for node, status in read.items():
            for resource, flag in ((Resource.MEMORY, status.memory),
                                   (Resource.DISK, status.disk)):
                alarm = NodeAlarm(node, resource)
                held = False if status.running is False else \
                    flag if flag is not None else alarm in known
                assert (alarm in after) == held
        assert {a.node for a in after} <= set(read)
        known = after
