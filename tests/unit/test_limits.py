"""Effective limits: RabbitMQ's argument/policy precedence and Qpid's RING classification."""

from __future__ import annotations

import pytest

from sidecar.flow.queue_limits import QueueLimits, effective_limits


@pytest.mark.parametrize(
    ("arguments", "policy", "expected"),
    [
        ({}, {}, QueueLimits(None, None, "drop-head")),
        ({"x-max-length": 1000}, {}, QueueLimits(1000, None, "drop-head")),
        ({"x-max-length": 1000}, {"max-length": 500}, QueueLimits(500, None, "drop-head")),
        ({"x-max-length": 100}, {"max-length": 500}, QueueLimits(100, None, "drop-head")),
        ({}, {"max-length-bytes": 4096}, QueueLimits(None, 4096, "drop-head")),
        # overflow: the queue's own argument wins over the policy
        ({"x-overflow": "reject-publish"}, {"overflow": "drop-head"},
         QueueLimits(None, None, "reject-publish")),
        ({}, {"overflow": "reject-publish-dlx"}, QueueLimits(None, None, "reject-publish-dlx")),
        # values the broker would ignore are ignored here too
        ({"x-max-length": "10", "x-max-length-bytes": -1}, {"max-length": True},
         QueueLimits(None, None, "drop-head")),
    ],
)
def test_effective_limits(arguments: dict, policy: dict, expected: QueueLimits) -> None:
    assert effective_limits(arguments, policy) == expected


@pytest.mark.parametrize(
    ("limits", "ring"),
    [
        (QueueLimits(None, None, "drop-head"), False),  # nothing is ever dropped
        (QueueLimits(1000, None, "drop-head"), True),
        (QueueLimits(None, 4096, "drop-head"), True),
        (QueueLimits(1000, None, "reject-publish"), False),
        (QueueLimits(1000, None, "reject-publish-dlx"), False),
    ],
)
def test_ring(limits: QueueLimits, ring: bool) -> None:
    assert limits.ring is ring
