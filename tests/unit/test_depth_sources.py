"""The pure parts of choosing a depth source: Prometheus figures laid over the listing,
the Prometheus endpoints a configuration names, and how often a costly read may come."""

from __future__ import annotations

import pytest

from sidecar.broker.merged_queues import MergedQueues
from sidecar.broker.prometheus_text import QueueFigures
from sidecar.broker.rabbitmq_prometheus import next_after
from sidecar.config import Settings
from sidecar.model import QueueInfo


def test_figures_replace_the_listings_depth_and_a_queue_without_figures_has_none() -> None:
    listed = [QueueInfo("/", "a", None, None, {"qpid.flow_stop_count": 5}, {}, "quorum"),
              QueueInfo("/", "b", 7, 70, unacked=1)]  # b's figures are gone: node down
    got = MergedQueues().merge(listed, {("/", "a"): QueueFigures(messages=3, unacked=1, bytes=36),
                                ("/", "zz"): QueueFigures(messages=1)})
    assert [(q.name, q.messages, q.bytes, q.unacked) for q in got] == [
        ("a", 3, 36, 1), ("b", None, None, None)]
    assert got[0].arguments == {"qpid.flow_stop_count": 5} and got[0].queue_type == "quorum"


def test_a_queue_read_on_its_own_keeps_the_management_figures_prometheus_has_none_of() -> None:
    """RabbitMQ 3.10 writes `"` and `\\` of a queue name into its labels unescaped: such a
    queue has no figures under its own name, and is read on its own every poll (seen
    failing: a queue named with a backslash never had a depth)."""
    odd, plain = QueueInfo("/", 'a\\u0437"b', 4, 40, unacked=0), QueueInfo("/", "p", 9, 90)
    got = MergedQueues().merge([odd, plain], {("/", "a\u0437"): QueueFigures(messages=4)},
                                   read_alone={("/", 'a\\u0437"b')})
    assert [(q.messages, q.bytes) for q in got] == [(4, 40), (None, None)]


def test_prometheus_urls_default_to_each_management_host_on_15692() -> None:
    settings = Settings(management_url=["https://rabbit-0:15671", "http://[::1]:15672"])
    assert settings.prometheus_urls() == ["https://rabbit-0:15691", "http://[::1]:15692"]
    named = Settings(prometheus_url="http://a:9419, http://b:9419")
    assert named.prometheus_urls() == ["http://a:9419", "http://b:9419"]


@pytest.mark.parametrize(("took", "share", "wait"), [
    (0.01, 0.05, 0.19),  # a few hundred queues: about every poll
    (0.8, 0.05, 15.2),  # 10,000 queues' byte figures: the broker busy 5 % of the time
    (2.0, 0.03, 64.67),  # 10,000 queues listed
])
def test_a_costly_read_waits_so_that_it_keeps_the_broker_busy_only_its_share(
        took: float, share: float, wait: float) -> None:
    assert next_after(took, share) == pytest.approx(wait, abs=0.01)
    assert took / (took + next_after(took, share)) == pytest.approx(share)


def test_a_queue_whose_parts_did_not_change_keeps_its_info_and_one_that_changed_gets_anew(
        ) -> None:
    listed = [QueueInfo("/", "a", None, None), QueueInfo("/", "b", None, None)]
    figures = {("/", "a"): QueueFigures(1, 0), ("/", "b"): QueueFigures(2, 0)}
    merge = MergedQueues()
    first = merge.merge(listed, figures, windows={("/", "a"): (1, 10)})
    again = merge.merge(listed, figures, windows={("/", "a"): (1, 10)})
    assert again[0] is first[0] and again[1] is first[1]
    figures[("/", "b")] = QueueFigures(3, 0)  # a new object: its lines changed
    moved = merge.merge(listed, figures, windows={("/", "a"): (1, 20)})
    assert moved[0] is not first[0] and moved[1] is not first[1]
    assert [(q.messages, q.consumers, q.unacked_limit) for q in moved] == [(1, 1, 20),
                                                                           (3, 0, 0)]
    unread = merge.merge(listed, figures)  # /api/consumers failed: no windows at all
    assert [(q.consumers, q.unacked_limit) for q in unread] == [(None, None)] * 2
