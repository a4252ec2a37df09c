"""`flow_sidecar_client.celery.install`: real Celery apps and a real worker process against
the real RabbitMQ and a real sidecar. Tasks wait (or raise) before they are published while
their destination is flow stopped, however Celery routes them."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import pytest
from celery import Celery, chain, group

from flow_sidecar_client import FlowControlTimeout, FlowStopped
from flow_sidecar_client.celery import FlowControl, install
from flow_sidecar_client.flow_gate import Destination
from tests.integration.conftest import Broker
from tests.integration.test_publisher import depth
from tests.utils.broker_target import AMQP_URL, amqp_parameters
from tests.utils.flow import routed, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually

ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")


def mgmt_depth(broker: Broker, queue: str) -> int:
    """The queue's messages as the management API shows them."""
    return int(broker.api("GET", f"/api/queues/%2F/{quote(queue, safe='')}").json()["messages"])


class Apps:
    """Celery apps made by a test, flow control installed; every queue and exchange Celery
    declares for them (each queue gets a direct exchange of its name) deleted after."""

    def __init__(self, broker: Broker, sidecar: SidecarProcess) -> None:
        self.broker = broker
        self.sidecar = sidecar
        self.made: list[tuple[Celery, FlowControl | None]] = []

    def make(self, *, install_it: bool = True, **options: Any) -> Celery:
        tag = uuid.uuid4().hex[:6]
        app = Celery(f"flow-test-{tag}", broker=AMQP_URL, set_as_current=False)
        app.conf.update(task_default_queue=self.queue(f"celery-default-{tag}"),
                        broker_connection_retry_on_startup=True)
        control = install(app, sidecar_url=self.sidecar.url, **options) if install_it else None
        self.made.append((app, control))
        return app

    def queue(self, name: str, **arguments: object) -> str:
        """A queue Celery may declare (and an exchange of the same name), cleaned up."""
        self.broker.created_queues.append(("/", name))
        self.broker.created_exchanges.append(name)
        if arguments:
            self.broker.channel.queue_declare(name, durable=True, arguments=arguments)
        return name

    def close(self) -> None:
        for app, control in self.made:
            if control is not None:
                control.uninstall()
            app.close()


@pytest.fixture
def apps(broker: Broker, shared_sidecar: SidecarProcess) -> Iterator[Apps]:
    made = Apps(broker, shared_sidecar)
    try:
        yield made
    finally:
        made.close()


def stopped_queue(apps: Apps, qname: Callable[[str], str], base: str, stop: int = 5,
                  resume: int = 2) -> str:
    """A queue over its stop threshold, as the sidecar says."""
    queue = apps.queue(qname(base), **{"qpid.flow_stop_count": stop,
                                       "qpid.flow_resume_count": resume})
    apps.broker.publish(queue, stop + 1)
    wait_depth(apps.sidecar, queue, stop + 1, stopped=True)
    return queue


def test_tasks_wait_for_a_stopped_queue_and_are_published_when_it_flows(
        apps: Apps, qname: Callable[[str], str], caplog: pytest.LogCaptureFixture) -> None:
    """delay via task_routes, a group, a chain and a route through an exchange (no queue
    named: Celery declares nothing): none is published while the queue is stopped (the
    management API shows its depth unchanged), all once it flows."""
    queue = stopped_queue(apps, qname, "routed")
    exchange = routed(apps.sidecar, apps.broker.fanout(qname("fan"), queue), 1)
    app = apps.make(timeout=30)
    app.conf.task_routes = {"orders.place": {"queue": queue},
                            "orders.fan": {"exchange": exchange, "routing_key": "k"}}

    @app.task(name="orders.place")
    def place(n: int) -> int:
        return n

    sends = [lambda: place.delay(1),
             lambda: group(place.s(2), place.s(3)).apply_async(),
             lambda: chain(place.s(4), place.s(5)).apply_async(),  # one message: the first
             lambda: app.send_task("orders.fan")]
    caplog.set_level(logging.WARNING, "flow_sidecar.client")
    threads = [threading.Thread(target=send) for send in sends]
    for t in threads:
        t.start()
    time.sleep(2.5)  # more than the broker's statistics interval (1 s)
    assert all(t.is_alive() for t in threads)
    assert mgmt_depth(apps.broker, queue) == 6 and depth(apps.broker, queue) == 6
    assert "Broker enforced flow control has been enforced" in caplog.text
    apps.broker.drain(queue, 6)  # room for the 5 below the stop: grants keep it there
    resumed = time.monotonic()
    for t in threads:
        t.join(15)
    waited = time.monotonic() - resumed
    print(f"\ncelery: 5 tasks published {waited:.2f} s after the drain")
    assert not any(t.is_alive() for t in threads)
    assert eventually(lambda: depth(apps.broker, queue) == 5)


def test_several_sending_threads_never_pass_the_stop_by_more_than_their_windows(
        apps: Apps, qname: Callable[[str], str]) -> None:
    stop, capacity, senders = 100, 20, 4
    queue = apps.queue(qname("threads"), **{"qpid.flow_stop_count": stop,
                                            "qpid.flow_resume_count": 50})
    eventually(lambda: apps.sidecar.get(f"/flow/%2F/{quote(queue, safe='')}").ok)
    app = apps.make(timeout=1.5, capacity=capacity)
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        connection = pika.BlockingConnection(amqp_parameters())
        channel = connection.channel()
        while not done.is_set():
            seen.append(channel.queue_declare(queue, passive=True).method.message_count)
            time.sleep(0.02)
        connection.close()

    def send() -> int:
        sent = 0
        while True:
            try:
                app.send_task("orders.place", (sent,), queue=queue)
            except FlowControlTimeout:
                return sent
            sent += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(send())) for _ in range(senders)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        done.set()
        watcher.join()
    final = depth(apps.broker, queue)
    print(f"\ncelery: {senders} threads sent {counts}, peak {max(seen)}, final {final}, "
          f"stop {stop}, bound {stop + senders * capacity}")
    assert final == sum(counts) >= stop - senders * capacity
    assert max([*seen, final]) <= stop + senders * capacity


def test_raise_names_the_queue_by_route_and_by_exchange(
        apps: Apps, qname: Callable[[str], str]) -> None:
    """mode="raise": FlowStopped names the stopped queue, for `queue=` and for a route
    through an exchange (the sidecar's exchange route); nothing is published. A route that
    reaches only flowing queues publishes."""
    stopped = stopped_queue(apps, qname, "raise")
    flowing = apps.queue(qname("flowing"))
    apps.broker.channel.queue_declare(flowing, durable=True)
    exchange = apps.broker.fanout(qname("fan"), stopped)
    other = apps.broker.fanout(qname("fan-ok"), flowing)
    routed(apps.sidecar, exchange, 1)
    routed(apps.sidecar, other, 1)
    app = apps.make(mode="raise")
    app.conf.task_routes = {
        "via.exchange": {"exchange": exchange, "routing_key": "k", "queue": stopped},
        "via.other": {"exchange": other, "routing_key": "k"}}
    with pytest.raises(FlowStopped, match=f"by queue '{stopped}'") as by_queue:
        app.send_task("direct", queue=stopped)
    assert by_queue.value.queues == (stopped,)
    with pytest.raises(FlowStopped, match=f"exchange '{exchange}'.*by queue '{stopped}'"):
        app.send_task("via.exchange")
    app.send_task("via.other")
    assert eventually(lambda: depth(apps.broker, flowing) == 1)
    assert depth(apps.broker, stopped) == 6


def test_two_apps_in_one_process_keep_their_own_settings(
        apps: Apps, qname: Callable[[str], str]) -> None:
    """Flow control is installed on one app only: the other one's tasks are not held."""
    queue = stopped_queue(apps, qname, "two-apps")
    guarded = apps.make(mode="raise")
    free = apps.make(install_it=False)
    free.send_task("any", queue=queue)
    with pytest.raises(FlowStopped):
        guarded.send_task("any", queue=queue)
    assert eventually(lambda: depth(apps.broker, queue) == 7)


def test_a_sidecar_outage_holds_a_stopped_queue_for_the_grace_period_then_fails_open_once(
        broker: Broker, qname: Callable[[str], str],
        sidecar_factory: Callable[..., SidecarProcess],
        caplog: pytest.LogCaptureFixture) -> None:
    """The queue is stopped and the sidecar killed (-9): a task sent meanwhile is held,
    not published, until `unreachable_grace` has passed; then, the sidecar still gone, it
    and the next ones are published, with one WARNING for the outage."""
    grace = 3.0
    apps = Apps(broker, sidecar_factory("--poll-interval", "0.2").start())
    try:
        queue = stopped_queue(apps, qname, "outage")
        app = apps.make(timeout=30, unreachable_grace=grace)
        control = apps.made[-1][1]
        assert control is not None
        gate = control.gates.get(Destination("/", queue=queue))  # it heard: stopped
        assert gate.stopped
        caplog.set_level(logging.WARNING, "flow_sidecar.client")
        apps.sidecar.kill()
        killed = time.monotonic()
        sender = threading.Thread(target=lambda: app.send_task("held", queue=queue))
        sender.start()
        time.sleep(grace - 0.5)
        assert sender.is_alive() and depth(broker, queue) == 6
        sender.join(grace + 5)
        opened = time.monotonic() - killed
        print(f"\ncelery: a task held {opened:.2f} s by a sidecar outage (grace {grace} s)")
        assert not sender.is_alive() and opened >= grace - 0.5
        app.send_task("after", queue=queue)
        assert eventually(lambda: depth(broker, queue) == 8)
        warnings = [r.getMessage() for r in caplog.records if r.name == "flow_sidecar.client"
                    and r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert f"for {grace:g}s" in warnings[0] and "sending without flow control" in warnings[0]
    finally:
        apps.close()


@pytest.fixture
def worker(apps: Apps, qname: Callable[[str], str], tmp_path: Path) -> Iterator[str]:
    """A real worker (solo pool: one task at a time) consuming its own queue, whose stop
    is 3; the queue's name."""
    own = apps.queue(qname("worker"), **{"qpid.flow_stop_count": 3,
                                         "qpid.flow_resume_count": 1})
    env = {**os.environ, "FLOW_TEST_CELERY_QUEUE": own, "FLOW_TEST_CELERY_BROKER": AMQP_URL,
           "FLOW_SIDECAR_URL": apps.sidecar.url}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(CELERY), "-A", "tests.utils.celery_worker_app", "worker", "--pool", "solo",
             "-Q", own, "-l", "info", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "-n", f"{own}@%h"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: "ready." in log.read_text(), timeout=30)
        yield own
    finally:
        proc.terminate()  # a warm shutdown waits for the task at hand: not for long
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        print(log.read_text()[-3000:])


def test_a_worker_sends_to_its_own_stopped_queue_at_once_and_waits_for_others(
        apps: Apps, qname: Callable[[str], str], worker: str) -> None:
    """Solo pool: a task sending to the queue its worker consumes is not held there (its
    waiting would keep that queue full); one sending to another stopped queue waits until
    that queue flows, and the worker goes on afterwards."""
    app = apps.make()
    app.conf.update(result_backend="rpc://")
    own = app.send_task("flow_test.send_to", (worker, True), queue=worker)
    apps.broker.publish(worker, 6)  # over its stop while the task runs (the worker drops them)
    took = own.get(timeout=30)
    print(f"\ncelery worker: the send to its own stopped queue took {took:.3f} s")
    assert took < 1.0
    other = stopped_queue(apps, qname, "elsewhere")
    held = app.send_task("flow_test.send_to", (other,), queue=worker)
    time.sleep(2.5)
    assert not held.ready() and mgmt_depth(apps.broker, other) == 6
    apps.broker.drain(other, 5)
    assert held.get(timeout=15) > 2.0
    assert eventually(lambda: depth(apps.broker, other) == 2)
