"""Pacing against the real broker: a registered producer of a stopped queue is offered
`suggestedRate` 0 (anyone else sees the plain answer), and once the queue resumes a
publisher with `pacing=True` that would send faster keeps to the rate it is offered."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pika

from flow_sidecar_client.publisher import FlowControlledPublisher
from tests.integration.conftest import Broker
from tests.utils.broker_target import AMQP_URL
from tests.utils.flow import flow
from tests.utils.sidecar_process import SidecarProcess, eventually

CONSUMER_RATE, OFFERED = 100.0, 250.0  # messages/s taken, and offered by the publisher


def consume(queue: str, stop: threading.Event) -> None:
    """Take CONSUMER_RATE messages/s until `stop`."""
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=20)
    for method, _props, _body in channel.consume(queue, inactivity_timeout=0.1):
        if stop.is_set():
            break
        if method is not None:
            channel.basic_ack(method.delivery_tag)
            time.sleep(1 / CONSUMER_RATE)
    channel.cancel()
    connection.close()


def test_a_paced_publisher_is_offered_a_rate_and_keeps_to_it(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    queue = broker.declare(qname("paced"), {"qpid.flow_stop_count": 100,
                                            "qpid.flow_resume_count": 80,
                                            "qpid.flow_stop_size": 0})
    broker.publish(queue, 150)
    eventually(lambda: flow(shared_sidecar, queue)["flowStopped"])
    said = shared_sidecar.get(f"/flow/%2F/{queue}",
                              headers={"X-Producer-Id": "registered",
                                       "X-Producer-Published": "150"}).json()
    assert said["flowStopped"] and said["suggestedRate"] == 0.0
    assert "suggestedRate" not in flow(shared_sidecar, queue)  # anonymous: the shared answer

    publisher = publishers(queue, sidecar_url=shared_sidecar.url, pacing=True, grants="off")
    stop = threading.Event()
    consumer = threading.Thread(target=consume, args=(queue, stop))
    consumer.start()
    try:
        eventually(lambda: publisher._watcher.suggested_rate, timeout=8)  # resumed, paced
        offered, start, sent = [], time.monotonic(), publisher.published
        while time.monotonic() - start < 4:
            publisher.publish(b"x")
            rate = publisher._watcher.suggested_rate
            if rate is not None:
                offered.append(rate)
            time.sleep(1 / OFFERED)
        took = time.monotonic() - start
        actual = (publisher.published - sent) / took
    finally:
        stop.set()
        consumer.join(10)
    mean = sum(offered) / len(offered)
    print(f"offered {mean:.1f}/s (min {min(offered):.1f}, max {max(offered):.1f}); "
          f"sent {actual:.1f}/s; would send {OFFERED:.0f}/s")
    assert 0 < mean < OFFERED * 0.8  # the drain is 100/s: the publisher is held back
    assert actual <= max(offered) * 1.2 + 5  # keeps to its rate (a 0.2 s burst at most)
    assert actual >= min(offered) * 0.5
