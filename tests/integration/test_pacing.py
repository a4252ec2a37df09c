"""Pacing against the real broker: a registered producer of a stopped queue is offered
`suggestedRate` 0 (anyone else sees the plain answer), and once the queue resumes a
publisher with `pacing=True` that would send faster keeps to the rate it is offered, the
blocking one and the asyncio one, until the queue runs empty and pacing ends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import pika

from flow_sidecar_client import aio
from flow_sidecar_client.publisher import FlowControlledPublisher
from tests.integration.conftest import Broker
from tests.utils.broker_target import AMQP_URL
from tests.utils.flow import flow
from tests.utils.sidecar_process import SidecarProcess, eventually

CONSUMER_RATE, OFFERED = 100.0, 250.0  # taken; offered by the publisher
RELEASED_WITHIN = 12.0  # seconds: the queue runs empty within about 2, pacing ends 3 later


def stopped_queue(broker: Broker, name: str, sidecar: SidecarProcess) -> str:
    """A queue over its stop of 100 (resume 80), as the sidecar says."""
    queue = broker.declare(name, {"qpid.flow_stop_count": 100, "qpid.flow_resume_count": 80,
                                  "qpid.flow_stop_size": 0})
    broker.publish(queue, 150)
    eventually(lambda: flow(sidecar, queue)["flowStopped"])
    return queue


@contextmanager
def consumer(queue: str) -> Iterator[None]:
    """CONSUMER_RATE messages/s taken from `queue` in a thread, while the block runs."""
    stop = threading.Event()

    def consume() -> None:
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

    thread = threading.Thread(target=consume)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def stops_of(sidecar: SidecarProcess, queue: str) -> Callable[[], int]:
    """The queue's flowStoppedCount, as the sidecar says it now."""
    return lambda: int(flow(sidecar, queue)["flowStoppedCount"])


async def sent_at(publish: Callable[[], Awaitable[None]], published: Callable[[], int],
                  offered: Callable[[], float | None], stops: Callable[[], int]) -> None:
    """Once the publisher is offered a rate (the queue resumed, paced), try OFFERED
    messages/s until it is released: it must keep to what it is offered, and so never
    stop the queue again (one that ignored its rate would: it fills at 150/s over 20 of
    headroom; stop-and-go alone would keep its average near the drain, so the average
    cannot tell). The first offers are low (the fill rate's window still holds the fill
    before the stop), the queue runs empty, and pacing must end then: consumers that
    wait for messages are no queue to pace (docs/graded-flow.md#pacing)."""
    deadline = time.monotonic() + 8
    while not offered() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    stopped = stops()
    rates, start, before = [], time.monotonic(), published()
    while (rate := offered()) is not None and time.monotonic() - start < RELEASED_WITHIN:
        rates.append(rate)
        await publish()
        await asyncio.sleep(1 / OFFERED)
    took = time.monotonic() - start
    actual = (published() - before) / took
    print(f"offered {min(rates):.1f}-{max(rates):.1f}/s; sent {actual:.1f}/s; "
          f"would send {OFFERED:.0f}/s; released after {took:.1f} s")
    assert stops() == stopped, "the paced publisher stopped the queue again"
    assert rate is None, f"still paced after {RELEASED_WITHIN:g} s of an empty queue"
    assert 0 < sum(rates) / len(rates) < OFFERED * 0.8  # the drain is 100/s: held back
    assert min(rates) * 0.5 <= actual <= max(rates) * 1.2 + 5  # a 0.2 s burst at most


def test_a_stopped_queue_offers_0_and_a_paced_publisher_keeps_to_its_rate(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    queue = stopped_queue(broker, qname("paced"), shared_sidecar)
    said = shared_sidecar.get(f"/flow/%2F/{queue}",
                              headers={"X-Producer-Id": "registered",
                                       "X-Producer-Published": "150"}).json()
    assert said["flowStopped"] and said["suggestedRate"] == 0.0
    assert "suggestedRate" not in flow(shared_sidecar, queue)  # anonymous: the shared answer
    publisher = publishers(queue, sidecar_url=shared_sidecar.url, pacing=True, grants="off")

    async def publish() -> None:
        publisher.publish(b"x")

    with consumer(queue):
        asyncio.run(sent_at(publish, lambda: publisher.published,
                            lambda: publisher._watcher.suggested_rate,
                            stops_of(shared_sidecar, queue)))


def test_the_asyncio_publisher_keeps_to_its_rate(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess) -> None:
    queue = stopped_queue(broker, qname("aio-paced"), shared_sidecar)

    async def scenario() -> None:
        async with aio.FlowControlledPublisher(queue, amqp=AMQP_URL, pacing=True,
                                               sidecar_url=shared_sidecar.url,
                                               grants="off") as publisher:
            watch = publisher._watch
            assert watch is not None and watch.pacing is not None
            pacing = watch.pacing
            with consumer(queue):
                await sent_at(lambda: publisher.publish(b"x"), lambda: publisher.published,
                              lambda: pacing.rate, stops_of(shared_sidecar, queue))

    asyncio.run(scenario())
