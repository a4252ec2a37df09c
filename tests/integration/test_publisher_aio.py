"""The asyncio publisher (flow_sidecar_client.aio) against the real broker and a real
sidecar: it waits on a stopped queue without blocking the event loop, a thousand of them
share one long poll, and its grants keep a queue at its stop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import aio_pika
import pytest

from flow_sidecar_client.aio import FlowControlledPublisher
from tests.integration.conftest import Broker
from tests.utils.broker_target import AMQP_URL
from tests.utils.flow import flow, known
from tests.utils.sidecar_process import SidecarProcess, eventually

CLIENT = "flow_sidecar.client"


def depth(broker: Broker, queue: str) -> int:
    """Messages on the queue now (passive declare: exact, no statistics lag)."""
    return int(broker.channel.queue_declare(queue, passive=True).method.message_count)


def test_a_stopped_queue_makes_publish_wait_and_the_loop_keeps_running(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        caplog: pytest.LogCaptureFixture) -> None:
    queue = known(shared_sidecar, broker.declare(qname("aio-stop"), {
        "qpid.flow_stop_count": 3, "qpid.flow_resume_count": 1}))
    broker.publish(queue, 4)  # past its stop
    eventually(lambda: flow(shared_sidecar, queue)["flowStopped"])
    caplog.set_level(logging.INFO, logger=CLIENT)

    async def scenario() -> tuple[int, float, float]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        async with FlowControlledPublisher(queue, amqp=AMQP_URL, sidecar_url=shared_sidecar.url,
                                           flow_control_wait_notify_period=500) as publisher:
            assert publisher.flow_stopped
            started = time.monotonic()
            sending = asyncio.create_task(publisher.publish(b"held"))
            await asyncio.sleep(1.5)
            assert not sending.done()
            held_ticks = ticks
            await asyncio.to_thread(broker.drain, queue, 4)
            await asyncio.wait_for(sending, 15)
            waited = time.monotonic() - started
        ticking.cancel()
        return held_ticks, waited, time.monotonic() - started

    held_ticks, waited, _ = asyncio.run(scenario())
    assert held_ticks >= 50, "the event loop ran while publish() waited"
    assert waited >= 1.5
    eventually(lambda: depth(broker, queue) == 1, timeout=15)
    lines = [r.getMessage() for r in caplog.records if r.name == CLIENT]
    assert lines[0] == "Broker enforced flow control has been enforced"
    assert "Message send delayed by 0.5s due to broker enforced flow control" in lines


def test_a_thousand_publishers_of_one_queue_share_one_long_poll(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start(wait_ready=False)
    # its own sidecar, so that no other poll is parked there (a loaded machine starts slowly)
    eventually(lambda: sidecar.get("/readyz").ok, timeout=90)
    queue = known(sidecar, broker.declare(qname("aio-many")))

    async def scenario() -> tuple[int, list[object], int]:
        connection = await aio_pika.connect_robust(AMQP_URL)
        publishers = [FlowControlledPublisher(queue, amqp=connection, sidecar_url=sidecar.url,
                                              capacity=5, grants="off") for _ in range(1_000)]
        try:
            await asyncio.gather(*(p.__aenter__() for p in publishers))
            await asyncio.gather(*(p.publish(b"x") for p in publishers))
            await asyncio.sleep(2.0)  # the poll that says the summed windows is parked
            waiting = await asyncio.to_thread(
                lambda: sidecar.get("/healthz").json()["wakeups"]["longPollsWaiting"])
            producers = await asyncio.to_thread(
                lambda: sidecar.get(f"/queues/%2F/{queue}").json()["activeProducers"])
            await asyncio.gather(*(p.__aexit__(None, None, None) for p in publishers))
            return waiting, producers, sum(p.published for p in publishers)
        finally:
            await connection.close()

    waiting, producers, sent = asyncio.run(scenario())
    assert sent == 1_000
    assert waiting == 1, "one long poll for a thousand publishers"
    assert len(producers) == 1 and producers[0]["capacity"] == 5_000, producers
    eventually(lambda: depth(broker, queue) == 1_000, timeout=15)


def test_grants_keep_a_queue_at_its_stop(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess) -> None:
    stop = 500
    queue = known(shared_sidecar, broker.declare(qname("aio-grants"), {
        "qpid.flow_stop_count": stop, "qpid.flow_resume_count": stop // 2}))

    async def producer(connection: aio_pika.abc.AbstractConnection, until: float) -> int:
        async with FlowControlledPublisher(queue, amqp=connection, capacity=50,
                                           sidecar_url=shared_sidecar.url,
                                           flow_control_wait_failure=500) as publisher:
            while time.monotonic() < until:
                try:
                    await publisher.publish(b"m" * 100)
                except Exception as exc:  # noqa: BLE001  # held past the failure: stop
                    assert "timeout waiting on broker enforced flow control" in str(exc)
                    break
            return publisher.published

    async def scenario() -> int:
        connection = await aio_pika.connect_robust(AMQP_URL)
        try:
            until = time.monotonic() + 6
            return sum(await asyncio.gather(*(producer(connection, until) for _ in range(4))))
        finally:
            await connection.close()

    sent = asyncio.run(scenario())
    eventually(lambda: depth(broker, queue) == sent, timeout=15)
    print(f"\n4 asyncio producers of capacity 50 with grants: sent {sent}, stop {stop}")
    assert stop - 50 <= sent <= stop


def test_while_the_sidecar_is_away_a_stop_stays_a_stop_then_fails_open_once(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess],
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 44.2 for the asyncio publisher: the outage policy it shares with the blocking
    one (tests/unit/test_outage_policy.py has the table)."""
    sidecar = sidecar_factory("--poll-interval", "0.2").start(wait_ready=False)
    eventually(lambda: sidecar.get("/readyz").ok, timeout=90)
    queue = known(sidecar, broker.declare(qname("aio-away"), {
        "qpid.flow_stop_count": 3, "qpid.flow_resume_count": 1}))
    broker.publish(queue, 4)
    eventually(lambda: flow(sidecar, queue)["flowStopped"])
    caplog.set_level(logging.INFO, logger=CLIENT)

    async def scenario() -> float:
        async with FlowControlledPublisher(queue, amqp=AMQP_URL, sidecar_url=sidecar.url,
                                           unreachable_grace=4) as publisher:
            await asyncio.to_thread(sidecar.kill)
            gone = time.monotonic()
            sending = asyncio.create_task(publisher.publish(b"after the grace"))
            await asyncio.sleep(2.5)
            assert not sending.done(), "a stop stays a stop while the sidecar is away"
            await asyncio.wait_for(sending, 15)
            return time.monotonic() - gone

    waited = asyncio.run(scenario())
    assert 4 <= waited < 10
    assert depth(broker, queue) == 5
    warnings = [r.getMessage() for r in caplog.records
                if r.name == CLIENT and r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "for 4s" in warnings[0] and "sending without flow control until it answers" in \
        warnings[0]
