"""Live depth against a real RabbitMQ at its default 5 s statistics interval: an extra
node (tests/utils/extra_node.py, index 5) whose config has no statistics lines, and real
flow-sidecar processes pointed at it with --management-url and --amqp-url. When the suite
targets a 4.x node (tests/utils/broker_target.py) they run on that node instead, whose
statistics come every 1-5 s (quorum queues: 3-5 s whatever the settings); the node cannot
be hung there, so that test is skipped.

At 5 s statistics a crossing takes 5-10 s to reach `/flow` from the statistics alone;
these tests ask for 0.5 s (a loose bound; the figures are bench/live_reaction.py's)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest
import requests

from sidecar.broker.rabbitmq_live import WINDOW, RabbitMQLiveDepth
from tests.utils.broker_target import RETARGETED, TargetNode
from tests.utils.extra_node import ExtraNode
from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port

BOUND = 0.5  # seconds from a confirmed publish to /flow
RESUME_BOUND = 1.0  # a resume waits for a live upper bound; under load a few rounds


class Node:
    """The extra node: AMQP through pika (publisher confirms), queues deleted afterwards."""

    def __init__(self, node: ExtraNode | TargetNode) -> None:
        self.node = node
        self.amqp_url = node.amqp_url
        self.connection = pika.BlockingConnection(pika.URLParameters(self.amqp_url))
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.queues: list[str] = []

    def declare(self, base: str, **arguments: Any) -> str:
        name = f"{base}-{uuid.uuid4().hex[:6]}"
        self.channel.queue_declare(name, arguments=arguments)
        self.queues.append(name)
        return name

    def publish(self, queue: str, count: int) -> float:
        """Publish `count` confirmed messages; the monotonic time the last was confirmed."""
        for _ in range(count):
            self.channel.basic_publish("", queue, b"x" * 10)
        return time.monotonic()

    def sidecar(self, factory: Callable[..., SidecarProcess], *args: str) -> SidecarProcess:
        return factory(*self.management_args(), "--amqp-url", self.amqp_url,
                       "--poll-interval", "1.0", *args).start()

    def management_args(self) -> list[str]:
        return ["--management-url", self.node.management_url,
                "--management-user", self.node.auth[0],
                "--management-password", self.node.auth[1]]

    def close(self) -> None:
        for name in reversed(self.queues):
            self.channel.queue_delete(name)
        self.connection.close()


@pytest.fixture(scope="module")
def default_stats_node() -> ExtraNode | TargetNode:
    """RabbitMQ with its defaults: statistics every 5 s. Left running for the next run."""
    return TargetNode() if RETARGETED else ExtraNode("flowlive", 5).start()


@pytest.fixture
def node(default_stats_node: ExtraNode | TargetNode) -> Iterator[Node]:
    made = Node(default_stats_node)
    yield made
    made.close()


def answer(sidecar: SidecarProcess, queue: str, **headers: str) -> dict[str, Any]:
    r = sidecar.get(flow_path(queue), headers=headers)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def seconds_until(check: Callable[[], bool], since: float, limit: float = 20.0) -> float:
    """Seconds from `since` until `check()` holds (polled every 5 ms)."""
    while not check():
        assert time.monotonic() - since < limit, "never happened"
        time.sleep(0.005)
    return time.monotonic() - since


def with_statistics(node: Node, queue: str) -> None:
    """Wait for the broker's first statistics of `queue` (a new queue has none for up to
    5 s: no unacknowledged count, so no live figure of it is an upper bound yet)."""
    eventually(lambda: requests.get(f"{node.node.management_url}/api/queues/%2F/{queue}",
                                    auth=node.node.auth, timeout=5).json().get(
        "messages_unacknowledged") is not None, timeout=20)


def hot_queue(node: Node, sidecar: SidecarProcess, base: str) -> str:
    """A queue with stop 5 that a producer asked about (which makes it hot). Its size is
    not watched (a live sample has no bytes, so a queue that watches its size resumes on
    statistics: see test_a_size_stopped_queue_resumes_on_real_bytes_only)."""
    queue = node.declare(base, **{"qpid.flow_stop_count": 5, "qpid.flow_stop_size": 0})
    with_statistics(node, queue)  # until then its unacknowledged count is unknown
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
    answer(sidecar, queue, **{"X-Producer-Id": "test-producer", "X-Producer-Capacity": "10"})
    return queue


def test_a_crossing_reaches_flow_within_half_a_second_and_stale_statistics_never_undo_it(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = node.sidecar(sidecar_factory)
    queue = hot_queue(node, sidecar, "live-crossing")
    for _ in range(3):
        time.sleep(0.3)
        count = answer(sidecar, queue)["flowStoppedCount"]
        took = seconds_until(lambda: answer(sidecar, queue)["flowStopped"],
                             node.publish(queue, 6))
        assert took <= BOUND, f"crossing took {took:.3f} s to reach /flow"
        stopped = answer(sidecar, queue)
        assert stopped["depthSource"] == "live" and stopped["depth"]["messages"] == 6
        assert stopped["flowStoppedCount"] == count + 1
        node.channel.queue_purge(queue)
        took = seconds_until(lambda: not answer(sidecar, queue)["flowStopped"],
                             time.monotonic())
        assert took <= RESUME_BOUND, f"resume took {took:.3f} s to reach /flow"
    # Stopped long enough for the broker's statistics to show 6, then emptied: they go on
    # showing 6 for up to 5 s and the poller reads them every second, but the live depth
    # is newer, so the state must not flip back.
    node.publish(queue, 6)
    eventually(lambda: requests.get(f"{node.node.management_url}/api/queues/%2F/{queue}",
                                    auth=node.node.auth, timeout=5).json().get("messages") == 6,
               timeout=20)
    node.channel.queue_purge(queue)
    count = answer(sidecar, queue)["flowStoppedCount"]
    seconds_until(lambda: not answer(sidecar, queue)["flowStopped"], time.monotonic(), BOUND)
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:
        now = answer(sidecar, queue)
        assert not now["flowStopped"] and now["flowStoppedCount"] == count, now
        time.sleep(0.05)


def test_a_long_poll_waiter_wakes_on_the_live_crossing(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = node.sidecar(sidecar_factory)
    queue = hot_queue(node, sidecar, "live-waiter")
    before = answer(sidecar, queue)
    woken: dict[str, Any] = {}

    def wait() -> None:  # as a producer does: wait again on any change that is not a stop
        version, deadline = before["version"], time.monotonic() + 30
        while time.monotonic() < deadline:
            r = requests.get(sidecar.url + flow_path(queue), timeout=40,
                             params={"since": version, "wait": 30})
            woken["at"], woken["answer"] = time.monotonic(), r.json()
            if woken["answer"]["flowStopped"]:
                return
            version = woken["answer"]["version"]

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)  # parked
    sent = node.publish(queue, 6)
    waiter.join(40)
    assert woken["answer"]["flowStopped"], woken
    assert woken["at"] - sent <= BOUND, f"the waiter woke {woken['at'] - sent:.3f} s later"


def test_a_queue_deleted_under_the_sampler_does_not_stall_the_others(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = node.sidecar(sidecar_factory)
    doomed = hot_queue(node, sidecar, "live-doomed")
    kept = hot_queue(node, sidecar, "live-kept")
    node.channel.queue_delete(doomed)
    node.queues.remove(doomed)
    time.sleep(0.3)  # several rounds ask for the deleted queue before the polls drop it
    took = seconds_until(lambda: answer(sidecar, kept)["flowStopped"], node.publish(kept, 6))
    assert took <= BOUND
    live = sidecar.get("/healthz").json()["live"]
    assert live["connected"] and live["lastError"] is None, live
    assert "Traceback" not in sidecar.log()


def test_without_amqp_the_sidecar_works_from_statistics_and_says_so(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    nobody = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
    sidecar = sidecar_factory(*node.management_args(), "--amqp-url", nobody,
                              "--poll-interval", "1.0").start()
    queue = hot_queue(node, sidecar, "live-none")
    live = eventually(lambda: (h := sidecar.get("/healthz").json()["live"])["lastError"]
                      and h)
    assert live["enabled"] and not live["connected"] and "vhost '/'" in live["lastError"]
    assert "flow_sidecar_live_connected 0.0" in sidecar.get("/metrics").text
    node.publish(queue, 6)
    stopped = eventually(lambda: (a := answer(sidecar, queue))["flowStopped"] and a,
                         timeout=20)
    assert stopped["depthSource"] == "statistics"
    assert "guest:guest" not in sidecar.log()  # the URL's password is never logged


def test_an_amqp_url_of_another_broker_is_never_read(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """The AMQP URL reaches another broker (here the main node; a defaulted --amqp-url
    does when AMQP is not on the management host's 5672) holding an empty queue of the
    same name: its 0 would be read as this full queue's depth. Seen failing before the
    cluster-name check: `depthSource` "live" with 0 messages, and no error."""
    elsewhere = "amqp://guest:guest@127.0.0.1:5672/%2F"
    other = pika.BlockingConnection(pika.URLParameters(elsewhere))
    if other._impl.server_properties.get("cluster_name") == \
            requests.get(f"{node.node.management_url}/api/cluster-name", auth=node.node.auth,
                         timeout=5).json()["name"]:
        other.close()
        pytest.skip("the suite's target is the main node itself")
    sidecar = sidecar_factory(*node.management_args(), "--amqp-url", elsewhere,
                              "--poll-interval", "1.0").start()
    queue = node.declare("live-elsewhere", **{"qpid.flow_stop_count": 5,
                                              "qpid.flow_stop_size": 0})
    twin = other.channel()
    twin.queue_declare(queue, auto_delete=True)  # empty, on the other broker
    try:
        node.publish(queue, 6)
        with_statistics(node, queue)
        eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
        stopped = eventually(lambda: (a := answer(sidecar, queue, **{
            "X-Producer-Id": "test-producer"}))["flowStopped"] and a, timeout=20)
        assert stopped["depthSource"] == "statistics", stopped
        time.sleep(1.0)  # live rounds have had their chances
        held = answer(sidecar, queue)
        assert held["flowStopped"] and held["depthSource"] == "statistics", held
        live = sidecar.get("/healthz").json()["live"]
        assert not live["connected"] and "cluster" in live["lastError"], live
        assert "--amqp-url" in sidecar.log()
    finally:
        other.close()


def test_a_dropped_connection_reconnects(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = node.sidecar(sidecar_factory)
    queue = hot_queue(node, sidecar, "live-dropped")
    http = requests.Session()
    http.auth = node.node.auth

    def sidecar_connections() -> list[str]:
        listed = http.get(f"{node.node.management_url}/api/connections", timeout=10).json()
        return [c["name"] for c in listed if c.get("client_properties", {}).get(
            "connection_name") == "flow-sidecar live depth"]

    names = eventually(sidecar_connections, timeout=30)  # listed after a statistics round
    for name in names:
        http.delete(f"{node.node.management_url}/api/connections/{requests.utils.quote(name)}",
                    timeout=10, headers={"X-Reason": "test: drop the live connection"})
    eventually(lambda: sidecar.get("/healthz").json()["live"]["errors"] >= 1, timeout=20)
    eventually(lambda: sidecar.get("/healthz").json()["live"]["connected"], timeout=20)
    took = seconds_until(lambda: answer(sidecar, queue)["flowStopped"], node.publish(queue, 6))
    assert took <= BOUND


def test_a_hung_broker_changes_no_state_and_live_depth_says_so(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """SIGSTOP the node: the live round blocked on it gives up when heartbeats stop (5 s
    heartbeats), /healthz says so, the stopped queue stays stopped (--on-stale hold);
    once the node runs again the sampler reconnects by itself."""
    if not isinstance(node.node, ExtraNode):
        pytest.skip("the target node is shared: it is never hung")
    sidecar = node.sidecar(sidecar_factory, "--request-timeout", "2")
    queue = hot_queue(node, sidecar, "live-hung")
    node.publish(queue, 6)
    eventually(lambda: answer(sidecar, queue)["flowStopped"])
    node.node.hang()
    try:
        live = eventually(lambda: (h := sidecar.get("/healthz").json()["live"])[
            "lastError"] and h, timeout=40)
        assert not live["connected"]
        assert answer(sidecar, queue)["flowStopped"]
    finally:
        node.node.resume()
    eventually(lambda: sidecar.get("/healthz").json()["live"]["connected"], timeout=60)
    assert answer(sidecar, queue)["flowStopped"]
    assert "Traceback" not in sidecar.log()


def test_the_adapter_reads_ready_counts_and_gets_past_missing_and_locked_queues(
        node: Node) -> None:
    source = RabbitMQLiveDepth(node.amqp_url)
    other = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    try:
        first, last = node.declare("live-a"), node.declare("live-b")
        locked = other.channel().queue_declare("", exclusive=True).method.queue
        node.publish(first, 3)
        node.publish(last, 2)
        delivered, _, _ = node.channel.basic_get(last, auto_ack=False)  # unacked: not ready
        assert delivered is not None
        keys = [("/", first), ("/", "live-missing-" + uuid.uuid4().hex), ("/", locked),
                ("/", last)]
        batch = source.sample(keys)
        assert batch.error is None
        assert [(s.name, s.ready) for s in batch.samples] == [
            (first, 3), (keys[1][1], None), (locked, None), (last, 1)]
        assert source.sample([]).error is None  # keep-alive only
    finally:
        source.close()
        other.close()


def test_the_adapter_reads_more_queues_than_its_window_and_each_gets_its_own_count(
        node: Node) -> None:
    """Declares go out WINDOW at a time on as many channels and their answers come back in
    any order: 3 windows' worth of queues, each with its own count, and a queue deleted
    in the middle, read in one call, every count where it belongs, twice (the channel the
    404 closed is opened again)."""
    names = [node.declare(f"live-many-{i}") for i in range(3 * WINDOW)]
    for i, name in enumerate(names):
        node.publish(name, i % 7)
    gone = node.declare("live-gone")
    node.channel.queue_delete(gone)
    asked = names[:WINDOW] + [gone] + names[WINDOW:]
    source = RabbitMQLiveDepth(node.amqp_url)
    try:
        for _ in range(2):
            batch = source.sample([("/", name) for name in asked])
            assert batch.error is None
            read = {s.name: s.ready for s in batch.samples}
            assert read == {gone: None} | {name: i % 7 for i, name in enumerate(names)}
            assert [s.name for s in batch.samples] == asked  # in the order asked
    finally:
        source.close()


# -- issue 17: no false resume from any live figure, at a stock broker's 5 s statistics ----
def stopped_count_stays(sidecar: SidecarProcess, queue: str, count: int,
                        seconds: float) -> None:
    """For `seconds`, /flow says stopped with flowStoppedCount `count` (checked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = answer(sidecar, queue)
        assert now["flowStopped"] and now["flowStoppedCount"] == count, now
        time.sleep(0.05)


def test_a_prefetching_consumer_never_releases_a_full_queue(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """Stop 900 / resume 500, 1,000 messages, a consumer with prefetch 1,000 that
    acknowledges nothing for 20 s: live depth reads 0 ready, yet the queue stays stopped
    (the consumer's window bounds what it may hold unacknowledged), with no QUE-1004."""
    sidecar = node.sidecar(sidecar_factory)
    queue = node.declare("live-prefetch", **{"qpid.flow_stop_count": 900,
                                              "qpid.flow_resume_count": 500,
                                              "qpid.flow_stop_size": 0})
    with_statistics(node, queue)
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
    answer(sidecar, queue, **{"X-Producer-Id": "test-producer"})  # hot
    node.publish(queue, 1000)
    stopped = eventually(lambda: (a := answer(sidecar, queue))["flowStopped"] and a)
    consumer = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    try:
        channel = consumer.channel()
        channel.basic_qos(prefetch_count=1000)
        channel.basic_consume(queue, lambda *_: None)  # takes everything, acks nothing
        consumer.process_data_events(1)
        stopped_count_stays(sidecar, queue, stopped["flowStoppedCount"], 20)
    finally:
        consumer.close()
    assert not [line for line in sidecar.log().splitlines()
                if "QUE-1004" in line and f"qu({queue})" in line]


def test_a_size_stopped_queue_resumes_on_real_bytes_only(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """Stop 100 MB / resume 80 MB; 300 x 1 KB, 100 x 1 MB, 600 x 1 KB (100.9 MB); the 300
    small ones consumed: an estimate (700 x the mean size, 70.6 MB) is under the resume,
    the real 100.6 MB is not: the queue stays stopped through two statistics rounds."""
    sidecar = node.sidecar(sidecar_factory)
    queue = node.declare("live-sizes", **{"qpid.flow_stop_size": 100_000_000,
                                           "qpid.flow_resume_size": 80_000_000,
                                           "qpid.flow_stop_count": 0})
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
    for count, size in [(300, 1_000), (100, 1_000_000), (600, 1_000)]:
        for _ in range(count):
            node.channel.basic_publish("", queue, b"x" * size)
    stopped = eventually(lambda: (a := answer(sidecar, queue))["flowStopped"] and a,
                         timeout=30)
    for _ in range(300):
        method, _, _ = node.channel.basic_get(queue, auto_ack=True)
        assert method is not None
    stopped_count_stays(sidecar, queue, stopped["flowStoppedCount"], 12)
    assert not [line for line in sidecar.log().splitlines()
                if "QUE-1004" in line and f"qu({queue})" in line]


def test_older_statistics_never_replace_a_newer_live_depth_at_the_default_lag(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """No --broker-stats-lag: the default fits RabbitMQ's own 5 s statistics. A depth of
    900 read live must not fall back to the 100 that the statistics go on showing for
    seconds; /healthz tells the lag in use."""
    sidecar = node.sidecar(sidecar_factory)
    queue = node.declare("live-newest", **{"qpid.flow_stop_count": 1000})
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
    node.publish(queue, 100)
    eventually(lambda: (answer(sidecar, queue)["depth"] or {}).get("messages") == 100,
               timeout=20)
    eventually(lambda: requests.get(f"{node.node.management_url}/api/queues/%2F/{queue}",
                                    auth=node.node.auth, timeout=5).json().get("messages") == 100,
               timeout=20)
    answer(sidecar, queue, **{"X-Producer-Id": "test-producer"})  # hot
    node.publish(queue, 800)
    eventually(lambda: answer(sidecar, queue)["depth"]["messages"] == 900, timeout=BOUND * 4)
    deadline = time.monotonic() + 8  # past the next statistics rounds
    while time.monotonic() < deadline:
        assert answer(sidecar, queue)["depth"]["messages"] == 900
        time.sleep(0.05)
    lag = sidecar.get("/healthz").json()["statisticsLag"]
    assert lag["configured"] == 10.0 and lag["effective"] >= 10.0, lag


def test_a_burst_into_an_idle_queue_is_seen_at_live_speed(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """A queue the statistics show empty is not near its stop and has no producer asking,
    yet 150 messages into it (stop 100) reach /flow within half a second: the live budget
    the hot set leaves reads every watched queue in turn."""
    sidecar = node.sidecar(sidecar_factory)
    queue = node.declare("live-idle", **{"qpid.flow_stop_count": 100})
    with_statistics(node, queue)
    eventually(lambda: (answer(sidecar, queue)["depth"] or {}).get("messages") == 0,
               timeout=20)
    time.sleep(1.0)
    took = seconds_until(lambda: answer(sidecar, queue)["flowStopped"],
                         node.publish(queue, 150))
    assert took <= BOUND, f"the burst took {took:.3f} s to reach /flow"
    live = sidecar.get("/healthz").json()["live"]
    assert live["watchedQueues"] >= 1 and live["fullPassSeconds"] is not None, live


def test_a_purged_queue_with_the_default_size_thresholds_resumes_at_live_speed(
        node: Node, sidecar_factory: Callable[..., SidecarProcess]) -> None:
    """Issue 44's run at 5 s statistics: count 100/50 and the default size thresholds (the
    default queue limit's), 150 messages, no consumer: stopped. Purged, a live read of
    ready 0 with no consumer shows it empty, bytes too: flowing within RESUME_BOUND, not
    after statistics newer than the purge (5-10 s), and counted once."""
    sidecar = node.sidecar(sidecar_factory)
    queue = node.declare("live-purge", **{"qpid.flow_stop_count": 100,
                                           "qpid.flow_resume_count": 50})
    with_statistics(node, queue)
    eventually(lambda: sidecar.get(flow_path(queue)).status_code == 200, timeout=20)
    assert answer(sidecar, queue)["sources"]["size"] == "default"
    node.publish(queue, 150)
    stopped = eventually(lambda: (a := answer(sidecar, queue))["flowStopped"] and a,
                         timeout=20)
    eventually(lambda: requests.get(f"{node.node.management_url}/api/queues/%2F/{queue}",
                                    auth=node.node.auth, timeout=5).json().get(
        "messages") == 150, timeout=20)  # the statistics see it full: only live can release
    node.channel.queue_purge(queue)
    purged = time.monotonic()
    took = seconds_until(lambda: not answer(sidecar, queue)["flowStopped"], purged)
    assert took < RESUME_BOUND, f"flowing {took:.2f} s after the purge"
    after = answer(sidecar, queue)
    assert after["depth"] == {"messages": 0, "bytes": 0} and not after["bytesEstimated"]
    assert after["flowStoppedCount"] == stopped["flowStoppedCount"]
