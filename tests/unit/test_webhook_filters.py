"""Which queues a subscription covers: globs on the vhost and on the queue name."""

from __future__ import annotations

import pytest

from sidecar.signals.webhook_outbox import Subscription


def sub(vhost: str, queue: str) -> Subscription:
    return Subscription("wh_1", "http://127.0.0.1:9/", "s3cret", vhost, queue, True, None, 0.0)


@pytest.mark.parametrize(("vhost", "queue", "key", "matches"), [
    ("*", "*", ("/", "orders"), True),
    ("*", "*", ("prod", "a/b c"), True),
    ("/", "orders", ("/", "orders"), True),
    ("/", "orders", ("/", "orders2"), False),
    ("/", "orders", ("prod", "orders"), False),
    ("*", "orders.*", ("/", "orders.eu"), True),
    ("*", "orders.*", ("/", "orders"), False),
    ("*", "ORDERS", ("/", "orders"), False),  # case matters, as in RabbitMQ
    ("prod-?", "*", ("prod-1", "x"), True),
    ("prod-?", "*", ("prod-10", "x"), False),
    ("*", "[ab]*", ("/", "beta"), True),
    ("*", "[ab]*", ("/", "gamma"), False),
])
def test_globs(vhost: str, queue: str, key: tuple[str, str], matches: bool) -> None:
    assert sub(vhost, queue).matches(key) is matches


def test_secret_stays_out_of_repr() -> None:
    assert "s3cret" not in repr(sub("*", "*"))
