"""The paced publisher's token bucket (`flow_sidecar_client.send_pacing`)."""

from __future__ import annotations

import math

import pytest

from flow_sidecar_client.send_pacing import SendPacing


def sent_over(bucket: SendPacing, seconds: float, start: float = 0.0) -> int:
    """Messages a publisher sending as fast as the bucket allows gets out in `seconds`."""
    now, sent = start, 0
    while True:
        now += bucket.wait(now)
        if now > start + seconds:
            return sent
        bucket.sent(now)
        sent += 1


def test_not_paced_never_waits() -> None:
    bucket = SendPacing()
    for i in range(1000):
        assert bucket.wait(i / 1e6) == 0.0
        bucket.sent(i / 1e6)


@pytest.mark.parametrize("rate", [0.5, 12.5, 200.0, 3000.0])
def test_sends_keep_to_the_rate(rate: float) -> None:
    bucket = SendPacing()
    bucket.offered(rate, 0.0)
    assert sent_over(bucket, 20.0) == pytest.approx(rate * 20, rel=0.02, abs=2)


def test_a_rate_of_zero_waits_for_the_next_answer_and_a_stall_is_made_up_only_briefly() -> None:
    bucket = SendPacing()
    bucket.offered(0.0, 0.0)
    bucket.sent(0.0)  # the token it had
    assert bucket.wait(5.0) == math.inf
    bucket.offered(100.0, 5.0)
    assert bucket.wait(5.0) == pytest.approx(0.01)
    assert sent_over(bucket, 0.0, 60.0) == 20  # a minute idle: at most 0.2 s of burst
    bucket.offered(None, 60.0)
    assert bucket.wait(60.0) == 0.0
