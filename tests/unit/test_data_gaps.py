"""Missing broker data is noticed, on answers captured from a real RabbitMQ 4.0.5 with
`deprecated_features.permit.management_metrics_collection = false` (tests/unit/recorded)."""

from __future__ import annotations

import json
from pathlib import Path

from sidecar.broker.figures import FigureCheck
from sidecar.broker.rabbitmq import queue_from_json
from sidecar.flow.broker_alarms import NodeStatus, node_statuses
from sidecar.flow.data_gaps import DataGaps, Gap
from sidecar.model import QueueInfo

RECORDED = Path(__file__).parent / "recorded"
GRACE = 10.0


def denied_queues() -> list[QueueInfo]:
    body = json.loads((RECORDED / "rabbitmq40_statistics_denied_queues.json").read_text())
    return [queue_from_json(item, FigureCheck()) for item in body["items"]]


def denied_nodes() -> dict[str, NodeStatus]:
    nodes = node_statuses(json.loads(
        (RECORDED / "rabbitmq40_statistics_denied_nodes.json").read_text()))
    assert nodes is not None
    return nodes


def counted(name: str, messages: int | None) -> QueueInfo:
    return QueueInfo(vhost="/", name=name, messages=messages, bytes=None, arguments={},
                     policy={})


def test_statistics_denied_is_degraded_after_the_grace_and_names_the_setting() -> None:
    gaps = DataGaps(GRACE)
    for now in (0.0, 5.0, GRACE):
        gaps.observe_queues(denied_queues(), now)
        gaps.observe_nodes(denied_nodes(), now)
    assert gaps.problems(GRACE) == []  # a new queue has no figures for its first seconds
    gaps.observe_queues(denied_queues(), GRACE + 1)
    gaps.observe_nodes(denied_nodes(), GRACE + 1)
    problems = {p.gap: p.text for p in gaps.problems(GRACE + 1)}
    assert gaps.without_depth(GRACE + 1) == 2 and gaps.alarms_unreadable(GRACE + 1)
    assert problems[Gap.DEPTH].startswith("2 of 2 queues listed by the broker without a depth")
    for text in problems.values():
        assert "deprecated_features.permit.management_metrics_collection = true" in text


def test_one_blank_queue_among_counted_ones_is_named_as_such_without_the_setting() -> None:
    gaps = DataGaps(GRACE)
    for now in (0.0, GRACE + 1):
        gaps.observe_queues([counted("a", 3), counted("b", None)], now)
    [problem] = gaps.problems(GRACE + 1)
    assert problem.text.startswith("1 of 2 queues") and "deprecated" not in problem.text
    gaps.observe_queues([counted("a", None), counted("b", None), counted("new", None)],
                        GRACE + 2)  # none has figures: statistics are off, new queue or not
    [problem] = gaps.problems(GRACE + 2)
    assert problem.text.startswith("1 of 3 queues") and "statistics at all" in problem.text


def test_figures_or_deletion_end_the_gap_and_a_failed_node_read_changes_nothing() -> None:
    gaps = DataGaps(GRACE)
    gaps.observe_queues([counted("a", None), counted("b", None)], 0.0)
    gaps.observe_nodes(denied_nodes(), 0.0)
    gaps.observe_queues([counted("a", 2)], 20.0)  # a has figures, b is gone
    gaps.observe_nodes(None, 20.0)  # the node read failed: no conclusion
    assert gaps.without_depth(20.0) == 0 and gaps.alarms_unreadable(20.0)
    gaps.observe_nodes({"rabbit@a": NodeStatus(False, None)}, 21.0)
    assert not gaps.alarms_unreadable(21.0)


def test_news_is_one_line_per_outage_and_one_on_recovery() -> None:
    gaps = DataGaps(GRACE)
    gaps.observe_queues([counted("a", None)], 0.0)
    assert gaps.news(5.0) == ([], [])
    began, ended = gaps.news(11.0)
    assert [p.gap for p in began] == [Gap.DEPTH] and ended == []
    gaps.observe_queues([counted("a", None), counted("b", None)], 12.0)
    assert gaps.news(30.0) == ([], [])  # the wording changed; the outage did not
    gaps.observe_queues([counted("a", 1), counted("b", 0)], 31.0)
    assert gaps.news(31.0) == ([], [Gap.DEPTH])
