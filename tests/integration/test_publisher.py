"""The producer library against the real broker and a real sidecar process.

The seed's example: producers with capacities 50 and 15 fill a queue whose flow stop
count is 100; on Qpid the queue holds at most 100 + 50 + 15 = 165 before both block,
because the broker withholds completion from the 101st message on. RabbitMQ confirms at
once, so here the producers stop *sending* when the sidecar tells them, which it learns by
polling the broker's statistics: the overshoot is what they send during that lag,

    peak ≈ stop + Σ rate_i × lag    (lag ≈ 1.5 s: stats refresh + sidecar poll + wake-up)

with each rate bounded by capacity / confirm round-trip. The test drives both producers
at a known rate so that the overshoot can be predicted, prints the measured peak next to
165 and bounds it by stop + Σ capacity + Σ rate × LAG_BOUND.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from flow_sidecar_client.confirms import MessageNacked, MessageReturned
from flow_sidecar_client.publisher import FlowControlledPublisher, FlowControlTimeout
from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, routed
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port

STOP, RESUME = 100, 50
RATE = 100.0  # messages per second per producer in the seed test
#: Worst delay (s) from a crossing to a blocked producer that the bound allows: broker
#: stats refresh (1 s in deploy/rabbitmq.conf) + management sampling (1 s) + sidecar poll
#: (0.2 s) + long-poll wake-up (ms), about 2.2 s at worst; measured 0.45 to 1.5 s,
#: depending on where the crossing falls in the refresh cycle. 3 s leaves room for a
#: loaded machine; a publisher that ignored flow control would pass it within 4 s.
LAG_BOUND = 3.0
DELAYED = "Message send delayed by"
CLIENT = "flow_sidecar.client"


def depth(broker: Broker, queue: str) -> int:
    """Messages on the queue now (passive declare: exact, no statistics lag)."""
    return int(broker.channel.queue_declare(queue, passive=True).method.message_count)


def purge(broker: Broker, queue: str) -> None:
    broker.channel.queue_purge(queue)


def bodies(broker: Broker, queue: str) -> list[bytes]:
    """Take every message off the queue."""
    taken = []
    while (message := broker.channel.basic_get(queue, auto_ack=True))[0] is not None:
        taken.append(message[2])
    return taken


@dataclass
class Producer:
    """A thread publishing at RATE until told to stop; records when each send happened."""

    publisher: FlowControlledPublisher
    sent_at: list[float] = field(default_factory=list)
    most_in_flight: int = 0
    blocked_since: float | None = None
    released_at: float | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            started = self.blocked_since = time.monotonic()
            self.publisher.publish(b"m" * 64)
            now = time.monotonic()
            self.blocked_since = None
            if now - started > 0.5:
                self.released_at = next_at = now
            self.sent_at.append(now)
            self.most_in_flight = max(self.most_in_flight, self.publisher.unconfirmed)
            next_at += 1 / RATE
            time.sleep(max(0.0, next_at - time.monotonic()))

    def blocked_for(self) -> float:
        since = self.blocked_since
        return 0.0 if since is None else time.monotonic() - since


def test_seed_example_two_producers_block_and_resume(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    queue = known(shared_sidecar, broker.declare(qname("seed"), {
        "qpid.flow_stop_count": STOP, "qpid.flow_resume_count": RESUME,
        "x-max-length": 100_000}))
    producers = [Producer(publishers(queue, capacity=capacity, sidecar_url=shared_sidecar.url,
                                     flow_control_wait_failure=30_000, grants="off"))
                 for capacity in (50, 15)]  # long-poll alone; with grants: test_grants.py
    pool = ThreadPoolExecutor(len(producers))
    running = [pool.submit(p.run) for p in producers]

    def all_blocked() -> bool:
        for future in running:  # a producer that died raises its error here
            if future.done():
                future.result()
        return all(p.publisher.flow_stopped and p.blocked_for() > 0.5 for p in producers)

    eventually(all_blocked, timeout=15)
    sent = sum(p.publisher.published for p in producers)
    for p in producers:
        p.publisher.flush(5)
    peak = depth(broker, queue)
    assert peak == sent, "every message sent is on the queue, no other"
    time.sleep(0.5)
    assert depth(broker, queue) == peak, "both producers stay blocked"
    view = flow(shared_sidecar, queue)
    assert view["flowStopped"]
    assert (view["producers"]["active"], view["producers"]["capacity"]) == (2, 65)

    crossing = sorted(t for p in producers for t in p.sent_at)[STOP]  # the 101st message
    lags = [p.sent_at[-1] - crossing for p in producers]
    after = [sum(t > crossing for t in p.sent_at) for p in producers]
    bound = STOP + 65 + len(producers) * RATE * LAG_BOUND
    print(f"\nseed worst case (Qpid): stop {STOP} + capacities 50 + 15 = 165 messages")
    print(f"measured peak:   {peak} = stop {STOP} + {peak - STOP} overshoot, sent after the "
          f"101st message: {after[0]} by capacity 50, {after[1]} by capacity 15")
    print(f"lag from the 101st message to each block: {lags[0]:.2f} s, {lags[1]:.2f} s at "
          f"{RATE:g} msg/s each: stop + Σ rate × lag = {STOP + RATE * sum(lags):.0f}; most "
          f"unconfirmed at once: {producers[0].most_in_flight}/50, "
          f"{producers[1].most_in_flight}/15; asserted bound {bound:.0f}")
    assert STOP < peak <= bound

    purge(broker, queue)
    drained = time.monotonic()
    eventually(lambda: all((p.released_at or 0) > drained for p in producers), timeout=10)
    for p in producers:
        p.stop.set()
    for future in running:
        future.result(timeout=5)
    pool.shutdown()
    print(f"released {max(p.released_at or 0 for p in producers) - drained:.2f} s "
          "after the drain")


def test_notices_on_schedule_then_timeout_without_sending(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    queue = known(shared_sidecar, broker.declare(qname("timeout"),
                                                 {"qpid.flow_stop_count": 5}))
    broker.publish(queue, 6, b"before")
    eventually(lambda: flow(shared_sidecar, queue)["flowStopped"])
    monkeypatch.setenv("FLOW_SIDECAR_URL", shared_sidecar.url)
    monkeypatch.setenv("FLOW_CONTROL_WAIT_NOTIFY_PERIOD", "200")
    monkeypatch.setenv("FLOW_CONTROL_WAIT_FAILURE", "1000")
    publisher = publishers(queue, capacity=5)
    caplog.set_level(logging.WARNING, logger=CLIENT)

    started = time.time()
    with pytest.raises(FlowControlTimeout, match="^Message send failed due to timeout "
                       "waiting on broker enforced flow control$"):
        publisher.publish(b"timed out")
    elapsed = time.time() - started

    notices = [(r.created - started, r.getMessage()) for r in caplog.records
               if r.getMessage().startswith(DELAYED)]
    assert [m for _, m in notices] == [
        f"{DELAYED} {s}s due to broker enforced flow control" for s in ("0.2", "0.4", "0.6",
                                                                        "0.8")]
    for (at, _), due in zip(notices, (0.2, 0.4, 0.6, 0.8)):
        assert due <= at < due + 0.15, notices
    assert 1.0 <= elapsed < 1.3
    publisher.close()
    assert publisher.published == 0
    assert bodies(broker, queue) == [b"before"] * 6


def test_exchange_publisher_blocks_while_any_destination_is_stopped(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    free = known(shared_sidecar, broker.declare(qname("free")))
    limited = known(shared_sidecar, broker.declare(qname("limited"),
                                                   {"qpid.flow_stop_count": 5}))
    exchange = routed(shared_sidecar, broker.fanout(qname("fan"), free, limited), 2)
    publisher = publishers(exchange=exchange, sidecar_url=shared_sidecar.url,
                           flow_control_wait_notify_period=200, flow_control_wait_failure=500)
    publisher.publish(b"1")

    broker.publish(limited, 6)
    eventually(lambda: publisher.flow_stopped)
    with pytest.raises(FlowControlTimeout):
        publisher.publish(b"held")

    purge(broker, limited)
    eventually(lambda: not publisher.flow_stopped)
    publisher.publish(b"2")
    publisher.flush(5)
    assert bodies(broker, free) == [b"1", b"2"]
    assert bodies(broker, limited) == [b"2"]


def test_a_sidecar_gone_for_good_is_failed_open_after_the_grace_period_once(
        broker: Broker, qname: Callable[[str], str],
        publishers: Callable[..., FlowControlledPublisher],
        caplog: pytest.LogCaptureFixture) -> None:
    """By default nothing known is nothing sent, until the grace period ends; then the
    publisher sends without flow control and says so in one WARNING."""
    queue = broker.declare(qname("gone"))
    nowhere = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.INFO, logger=CLIENT)
    sender = publishers(queue, sidecar_url=nowhere, unreachable_grace=1.5)
    assert sender.flow_stopped
    started = time.monotonic()
    sender.publish(b"first")
    assert time.monotonic() - started >= 1.4
    for _ in range(20):
        sender.publish(b"x")
    sender.flush(5)
    assert depth(broker, queue) == 21
    warnings = [r.getMessage() for r in caplog.records
                if r.name == CLIENT and r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "for 1.5s" in warnings[0] and nowhere in warnings[0]
    assert "sending without flow control until it answers" in warnings[0]


def test_unreachable_sidecar_sends_and_warns_once_or_blocks(
        broker: Broker, qname: Callable[[str], str],
        publishers: Callable[..., FlowControlledPublisher],
        caplog: pytest.LogCaptureFixture) -> None:
    """on_unreachable chosen keeps its meaning: "send" at once, "block" for ever."""
    queue = broker.declare(qname("nosidecar"))
    nowhere = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.WARNING, logger=CLIENT)

    sender = publishers(queue, sidecar_url=nowhere, on_unreachable="send")
    for _ in range(20):
        sender.publish(b"x")
    sender.flush(5)
    assert depth(broker, queue) == 20
    warnings = [r.getMessage() for r in caplog.records if r.name == CLIENT]
    assert len(warnings) == 1, warnings
    assert "sending without flow control until it answers" in warnings[0]
    assert nowhere in warnings[0]

    holder = publishers(queue, sidecar_url=nowhere, on_unreachable="block",
                        flow_control_wait_failure=300)
    assert holder.flow_stopped
    with pytest.raises(FlowControlTimeout):
        holder.publish(b"held")
    assert depth(broker, queue) == 20


def test_sidecar_outage_warns_once_and_recovery_is_noticed(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess],
        publishers: Callable[..., FlowControlledPublisher],
        caplog: pytest.LogCaptureFixture) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    queue = known(sidecar, broker.declare(qname("outage")))
    publisher = publishers(queue, sidecar_url=sidecar.url, on_unreachable="block",
                           flow_control_wait_failure=200, poll_wait=2)
    caplog.set_level(logging.INFO, logger=CLIENT)
    publisher.publish(b"1")

    sidecar.kill()
    eventually(lambda: publisher.flow_stopped)
    for _ in range(2):
        with pytest.raises(FlowControlTimeout):
            publisher.publish(b"held")
    sidecar.start()
    eventually(lambda: not publisher.flow_stopped)
    publisher.publish(b"2")
    publisher.flush(5)

    lines = [r.getMessage() for r in caplog.records if r.name == CLIENT
             and not r.getMessage().startswith(DELAYED) and r.levelname != "ERROR"]
    assert len(lines) == 2, lines
    assert "holding messages until it answers" in lines[0]
    assert lines[1] == f"flow-sidecar answers again for queue {queue!r} in vhost '/'; " \
                       "obeying flow control"
    assert bodies(broker, queue) == [b"1", b"2"]


def test_one_publisher_shared_by_threads(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    queue = known(shared_sidecar, broker.declare(qname("shared")))
    publisher = publishers(queue, capacity=10, sidecar_url=shared_sidecar.url)
    peak_in_flight = 0

    def send(tag: bytes) -> None:
        nonlocal peak_in_flight
        for _ in range(200):
            publisher.publish(tag)
            peak_in_flight = max(peak_in_flight, publisher.unconfirmed)

    threads = [threading.Thread(target=send, args=(bytes([65 + i]),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    publisher.close()
    taken = bodies(broker, queue)
    assert sorted(set(taken)) == [b"A", b"B", b"C", b"D"]
    assert len(taken) == 800 and all(taken.count(t) == 200 for t in set(taken))
    assert 1 < peak_in_flight <= 10, "a window wider than one message, never over capacity"


def test_refused_messages_raise_clear_errors(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess,
        publishers: Callable[..., FlowControlledPublisher]) -> None:
    full = known(shared_sidecar, broker.declare(qname("full"), {  # no flow control: the
        "x-max-length": 1, "x-overflow": "reject-publish",        # broker itself refuses
        "qpid.flow_stop_count": 0, "qpid.flow_stop_size": 0}))
    publisher = publishers(full, sidecar_url=shared_sidecar.url)
    publisher.publish(b"fits")
    publisher.publish(b"rejected")
    with pytest.raises(MessageNacked, match=r"nacked 1 message\(s\) \(delivery tags 2\)"):
        publisher.flush(5)

    nowhere = qname("missing")  # no such queue: the default exchange returns the message
    lost = publishers(nowhere, sidecar_url=shared_sidecar.url)
    lost.publish(b"x")
    with pytest.raises(MessageReturned, match=f"routing key '{nowhere}': 312 NO_ROUTE"):
        lost.flush(5)
