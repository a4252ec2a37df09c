"""`/api/consumers` read into per-queue prefetch windows (pure): what bounds the messages a
live ready count leaves out. Rows as RabbitMQ 3.10 answers them with our columns."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.broker.rabbitmq import consumer_windows


def consumer(queue: str, ack: bool, prefetch: int, vhost: str = "/") -> dict[str, Any]:
    return {"ack_required": ack, "prefetch_count": prefetch,
            "queue": {"name": queue, "vhost": vhost}}


@pytest.mark.parametrize(("rows", "expected"), [
    ([], {}),
    ([consumer("a", True, 7), consumer("a", True, 3)], {("/", "a"): (2, 10)}),
    ([consumer("a", False, 0), consumer("a", True, 7)], {("/", "a"): (2, 7)}),  # no-ack: 0
    ([consumer("a", True, 0), consumer("a", True, 7)], {("/", "a"): (2, None)}),  # unlimited
    ([consumer("a", True, 5, "v1"), consumer("a", True, 5)],
     {("v1", "a"): (1, 5), ("/", "a"): (1, 5)}),
    ([{"ack_required": True, "prefetch_count": 5, "queue": {"name": "a"}}], None),  # no vhost
    ({"error": "x"}, None),
])
def test_consumer_windows(rows: Any, expected: Any) -> None:
    assert consumer_windows(rows) == expected
