"""RabbitMQ's Prometheus answers, captured from real 4.0.5 and 4.3.6 nodes
(tests/unit/recorded/rabbitmq4*_{detailed_queue,node}_metrics.txt), parsed line by line.

The captures hold a classic queue named `we "ird" \\ ünï/x` and a quorum queue
`capq-quorum`, each with 7 messages of 10 body bytes, one of them delivered and unacked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.broker.prometheus_text import (
    FigureLines,
    QueueFigures,
    node_alarms,
    whole_lines,
)
from sidecar.flow.broker_alarms import NodeStatus

RECORDED = Path(__file__).parent / "recorded"
WEIRD = 'we "ird" \\ ünï/x'


def lines(name: str) -> list[str]:
    return (RECORDED / name).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("version", "quorum_bytes"), [("40", 70), ("43", 84)])
def test_queue_figures_of_a_real_answer(version: str, quorum_bytes: int) -> None:
    figures = FigureLines().read(lines(f"rabbitmq{version}_detailed_queue_metrics.txt"))
    assert figures[("/", WEIRD)] == QueueFigures(messages=7, unacked=1, bytes=70)
    # 4.3 counts 12 bytes per quorum message more than the body (so does its management API)
    assert figures[("/", "capq-quorum")] == QueueFigures(messages=7, unacked=1,
                                                         bytes=quorum_bytes)


def test_queue_figures_take_lines_one_at_a_time_and_skip_what_is_not_theirs() -> None:
    answer = iter([
        "# HELP rabbitmq_detailed_queue_messages Sum of ready and unacknowledged messages",
        'rabbitmq_detailed_queue_messages{vhost="v",queue="a\\nb"} 5',
        'rabbitmq_detailed_queue_messages_ready{vhost="v",queue="a\\nb"} 4',
        'rabbitmq_detailed_queue_messages_bytes{vhost="v",queue="a\\nb"} NaN',
        'rabbitmq_detailed_queue_messages{vhost="v",queue="cut',  # cut short: skipped
        'rabbitmq_detailed_queue_messages{queue="no vhost"} 1',
        'rabbitmq_detailed_queue_messages{vhost="v",queue="big"} 1.2e+07',
        "rabbitmq_detailed_queue_messages 3",
        "",
    ])
    assert FigureLines().read(answer) == {("v", "a\nb"): QueueFigures(messages=5),
                                     ("v", "big"): QueueFigures(messages=12_000_000)}


def test_node_alarms_of_a_real_answer_and_of_raised_alarms() -> None:
    assert node_alarms(lines("rabbitmq40_node_metrics.txt")) == (
        "rabbit4@localhost", NodeStatus(memory=False, disk=False))
    raised = ['rabbitmq_identity_info{rabbitmq_node="rabbit@a",rabbitmq_cluster="c"} 1',
              "rabbitmq_alarms_memory_used_watermark 1",
              "rabbitmq_alarms_free_disk_space_watermark 0"]
    assert node_alarms(raised) == ("rabbit@a", NodeStatus(memory=True, disk=False))
    assert node_alarms(raised[1:]) is None  # whose alarm? nothing can be concluded
    assert node_alarms(raised[:2]) == ("rabbit@a", NodeStatus(memory=True, disk=None))


def test_blocks_cut_anywhere_parse_as_the_whole_answer_with_the_nodes_named() -> None:
    """The HTTP body comes in blocks cut anywhere, inside a line or a UTF-8 character:
    whole_lines joins them first; the identity line names the node that answered."""
    answer = "\n".join([
        'rabbitmq_identity_info{rabbitmq_node="rabbit@ä",rabbitmq_cluster="c"} 1',
        "# TYPE rabbitmq_detailed_queue_messages gauge",
        'rabbitmq_detailed_queue_messages{vhost="/",queue="ünï \\"q\\""} 12',
        'rabbitmq_detailed_queue_messages_ready{vhost="/",queue="ünï \\"q\\""} 9',
        'rabbitmq_detailed_queue_messages_unacked{vhost="/",queue="ünï \\"q\\""} 3',
        'rabbitmq_detailed_queue_messages_bytes{vhost="/",queue="ünï \\"q\\""} 120',
        'rabbitmq_detailed_queue_messages{vhost="v",queue="plain"} 0',
    ]).encode()
    for size in (1, 2, 3, 7, 64, len(answer)):
        blocks = [answer[i:i + size] for i in range(0, len(answer), size)]
        nodes: set[str] = set()
        assert FigureLines().read(whole_lines(blocks), nodes) == {
            ("/", 'ünï "q"'): QueueFigures(messages=12, unacked=3, bytes=120),
            ("v", "plain"): QueueFigures(messages=0)}, size
        assert nodes == {"rabbit@ä"}


def _answer(figures: dict[str, tuple[int, int]]) -> list[str]:
    lines = [f'rabbitmq_detailed_queue_messages{{vhost="/",queue="{q}"}} {m}'
             for q, (m, _) in figures.items()]
    lines += [f'rabbitmq_detailed_queue_messages_unacked{{vhost="/",queue="{q}"}} {u}'
              for q, (_, u) in figures.items()]
    return ["\n".join(lines[:3]), "\n".join(lines[3:])]  # two blocks of whole lines


@pytest.mark.parametrize("answers", [
    [{"a": (1, 0), "b": (2, 1)}, {"a": (1, 0), "b": (3, 1)}, {"b": (3, 1), "c": (0, 0)},
     {}, {"a": (5, 5)}],
    [{"a": (1, 0)}, {"a": (1, 0)}, {"a": (0, 1)}, {"a": (1, 0)}],
])
def test_successive_answers_give_what_a_whole_parse_gives_and_keep_unchanged_figures(
        answers: list[dict[str, tuple[int, int]]]) -> None:
    """Only changed lines are parsed again (FigureLines): the result must still be that
    of parsing the answer alone, with the same object for a queue that did not change."""
    lines, before = FigureLines(), {}
    for answer in answers:
        got = lines.read(_answer(answer))
        assert got == FigureLines().read(_answer(answer))
        for key, figures in got.items():
            if key in before and before[key] == figures:
                assert figures is before[key]
        before = dict(got)
