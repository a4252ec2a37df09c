"""The pure parts of choosing a depth source: Prometheus figures laid over the listing,
and the Prometheus endpoints a configuration names."""

from __future__ import annotations

from sidecar.broker.prometheus_text import QueueFigures
from sidecar.broker.rabbitmq_prometheus import with_figures
from sidecar.config import Settings
from sidecar.model import QueueInfo


def test_figures_replace_the_listings_depth_and_a_queue_without_figures_has_none() -> None:
    listed = [QueueInfo("/", "a", None, None, {"qpid.flow_stop_count": 5}, {}, "quorum"),
              QueueInfo("/", "b", 7, 70, unacked=1)]  # b's figures are gone: node down
    got = with_figures(listed, {("/", "a"): QueueFigures(messages=3, unacked=1, bytes=36),
                                ("/", "zz"): QueueFigures(messages=1)})
    assert [(q.name, q.messages, q.bytes, q.unacked) for q in got] == [
        ("a", 3, 36, 1), ("b", None, None, None)]
    assert got[0].arguments == {"qpid.flow_stop_count": 5} and got[0].queue_type == "quorum"


def test_prometheus_urls_default_to_each_management_host_on_15692() -> None:
    settings = Settings(management_url=["https://rabbit-0:15671", "http://[::1]:15672"])
    assert settings.prometheus_urls() == ["https://rabbit-0:15691", "http://[::1]:15692"]
    named = Settings(prometheus_url="http://a:9419, http://b:9419")
    assert named.prometheus_urls() == ["http://a:9419", "http://b:9419"]
