"""Faults on the three-node cluster with two flow-sidecar replicas sharing their state:
kill -9 of the delivering replica while producers long-poll through both, and one RabbitMQ
node stopped for 60 s; thresholds are PUT and queues cross their thresholds during each.

Each test prints its figures (`FAULT ...`, shown with `pytest -s`; docs/benchmarks.md quotes them):
how long until /flow answers correctly from the surviving replica, settings lost (must be
0), webhook events lost (must be 0) and posted twice (reported), and state flips the fault
caused (must be 0).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from tests.cluster.conftest import ClusterQueues, shared_flags
from tests.utils.cluster import Cluster
from tests.utils.faults import Producer, settings_of, write_anywhere
from tests.utils.flow import flow, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import WebhookReceiver

SECRET = "whsec_c2lkZWNhci10ZXN0LXNlY3JldC1rZXktMzItYnl0ZXMh"
STOP_4 = {"qpid.flow_stop_count": 4, "qpid.flow_resume_count": 2}
QUORUM = {"x-queue-type": "quorum"}
Sidecars = Callable[..., SidecarProcess]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET, delay=1.0).start()  # slow: events are in flight at a kill
    yield made
    made.stop()


@dataclass
class Rig:
    """Two replicas, a steadily stopped and a steadily flowing queue (anything else they
    tell producers is a flip), a queue that goes through episodes for webhooks, producers
    long-polling the steady ones through each replica, and the writes made meanwhile."""

    cluster: Cluster
    queues: ClusterQueues
    replicas: list[SidecarProcess]
    receiver: WebhookReceiver
    steady_on: str
    steady_off: str
    flipping: str
    producers: list[tuple[Producer, bool]] = field(default_factory=list)
    episodes: int = 0
    written: dict[str, dict[str, int]] = field(default_factory=dict)
    refused_writes: int = 0

    def start_producers(self) -> None:
        for queue, stopped in ((self.steady_on, True), (self.steady_off, False)):
            for first in range(len(self.replicas)):
                producer = Producer(self.replicas, queue, first)
                producer.start()
                self.producers.append((producer, stopped))

    def episode(self, watch: list[SidecarProcess], node: int) -> None:
        """Stop and resume the flipping queue (depth 1 -> 5 -> 1) through `node`."""
        self.queues.publish(self.flipping, node, 4)
        eventually(lambda: all(flow(r, self.flipping)["flowStopped"] for r in watch), 30)
        self.queues.drain(self.flipping, node, 4)
        eventually(lambda: not any(flow(r, self.flipping)["flowStopped"] for r in watch), 30)
        self.episodes += 1

    def put(self, name: str, stop: int, order: list[SidecarProcess]) -> None:
        values = {"qpid.flow_stop_count": stop, "qpid.flow_resume_count": stop // 2}
        r, refused = write_anywhere(order, "PUT", queue_path(name) + "/flow", values)
        assert r.status_code == 200, r.text
        self.written[name] = values
        self.refused_writes += refused

    def figures(self, fault: str, since: float, change_seen: float) -> float:
        """Stop the producers, check and print what the fault (at `since`) did; returns the
        longest a producer went without an answer."""
        for producer, _ in self.producers:
            producer.finish()
        silence = max(p.longest_silence(since) for p, _ in self.producers)
        flips = sum(len(p.flips(stopped)) for p, stopped in self.producers)
        counts = {a.count for p, stopped in self.producers if stopped for a in p.answers}
        lost_settings = sum(settings_of(r, name) != values for name, values in
                            self.written.items() for r in self.replicas)
        eventually(lambda: len({e.webhook_id for e in self.receiver.events()})
                   >= 2 * self.episodes, 60)
        events = self.receiver.events()
        sequences = {e.event["data"]["sequence"] for e in events
                     if e.event["data"]["queue"] == self.flipping}
        lost_events = len(set(range(1, 2 * self.episodes + 1)) - sequences)
        posted_twice = sum(n - 1 for n in Counter(e.webhook_id for e in events).values())
        answers = sum(len(p.answers) for p, _ in self.producers)
        print(f"\nFAULT {fault}: producers went at most {silence:.2f}s without a correct /flow "
              f"answer (moving to the surviving replica included); a depth change made at the "
              f"fault seen by every replica after {change_seen:.2f}s; settings lost "
              f"{lost_settings} of "
              f"{len(self.written)} PUT during the fault ({self.refused_writes} tries "
              f"answered 503 or refused, then retried); webhook events lost {lost_events} "
              f"of {2 * self.episodes}, posted twice {posted_twice}; state flips {flips} "
              f"in {answers} long-poll answers; flowStoppedCount of the stopped queue "
              f"{sorted(counts)}")
        for producer, stopped in self.producers:  # what went wrong, if anything did
            for answer in producer.flips(stopped)[:5]:
                print(f"FLIP {producer.queue} {answer.at - since:+.2f}s {answer}")
        assert flips == 0
        assert counts == {1}
        assert lost_settings == 0
        assert lost_events == 0
        assert all(e.valid for e in self.receiver.received)
        return silence


def make_rig(cluster: Cluster, queues: ClusterQueues, qname: Callable[[str], str],
             sidecars: Sidecars, receiver: WebhookReceiver, *, steady_node: int) -> Rig:
    rig = Rig(cluster, queues,
              [sidecars(*shared_flags(cluster, "--stale-after", "5", first=first)).start()
               for first in (0, 1)], receiver,
              steady_on=queues.declare(qname("steady-on"), node=steady_node, messages=5),
              steady_off=queues.declare(qname("steady-off"), node=steady_node, messages=1),
              flipping=queues.declare(qname("flipping"), node=2, messages=1,
                                      arguments=QUORUM))
    a = rig.replicas[0]
    r = a.http.post(a.url + "/webhooks", timeout=10, json={
        "url": receiver.url, "secret": SECRET, "queue": rig.flipping})
    assert r.status_code == 201, r.text
    for queue in (rig.steady_on, rig.steady_off, rig.flipping):
        assert a.put(queue_path(queue) + "/flow", json=STOP_4).status_code == 200
    eventually(lambda: all(flow(r, rig.steady_on)["flowStopped"] and not flow(
        r, rig.steady_off)["flowStopped"] and (flow(r, rig.flipping)["depth"] or {}).get(
            "messages") == 1
        for r in rig.replicas), 30)
    eventually(lambda: all(len(r.get("/webhooks").json()) == 1 for r in rig.replicas))
    rig.start_producers()
    rig.episode(rig.replicas, node=0)
    return rig


def delivering(rig: Rig) -> int:
    """The replica that posts webhooks now (the queue's single active consumer): the one
    whose deliveries list shows them delivered."""
    sub_id = rig.replicas[0].get("/webhooks").json()[0]["id"]
    found: list[int] = []

    def look() -> bool:
        found[:] = [index for index, replica in enumerate(rig.replicas) if any(
            row["status"] == "delivered"
            for row in replica.get(f"/webhooks/{sub_id}/deliveries").json())]
        return len(found) == 1

    eventually(look, 30)
    return found[0]


def test_kill_9_of_the_delivering_replica(
        live_cluster: Cluster, cluster_queues: ClusterQueues, shared_state: Cluster,
        qname: Callable[[str], str], sidecars: Sidecars, receiver: WebhookReceiver) -> None:
    rig = make_rig(live_cluster, cluster_queues, qname, sidecars, receiver, steady_node=1)
    killed_index = delivering(rig)
    killed = rig.replicas[killed_index]
    survivor = rig.replicas[1 - killed_index]
    changed = cluster_queues.declare(qname("changed"), node=0, messages=1)
    assert survivor.put(queue_path(changed) + "/flow", json=STOP_4).status_code == 200
    wait_depth(survivor, changed, 1)

    cluster_queues.publish(rig.flipping, node=0, messages=4)  # an event in flight at the kill
    eventually(lambda: flow(survivor, rig.flipping)["flowStopped"], 30)
    killed.kill()
    moment = time.monotonic()
    cluster_queues.publish(changed, node=0, messages=4)  # a crossing at the fault
    for index in range(3):
        rig.put(qname(f"put{index}"), 10 + index, [killed, survivor])
    eventually(lambda: flow(survivor, changed)["flowStopped"], 30)
    change_seen = time.monotonic() - moment
    cluster_queues.drain(rig.flipping, node=1, messages=4)
    eventually(lambda: not flow(survivor, rig.flipping)["flowStopped"], 30)
    rig.episodes += 1
    rig.episode([survivor], node=1)
    assert any(p.switches for p, _ in rig.producers), "nobody was using the killed replica"

    killed.start()  # the same data directory: it rejoins and catches up
    rig.episode(rig.replicas, node=2)
    silence = rig.figures("kill -9 of the delivering replica", moment, change_seen)
    assert silence < 5.0


def test_a_broker_node_stopped_for_60_seconds(
        live_cluster: Cluster, cluster_queues: ClusterQueues, shared_state: Cluster,
        qname: Callable[[str], str], sidecars: Sidecars, receiver: WebhookReceiver) -> None:
    # The steady queues live on the node that stops: the replicas can read neither their
    # depth nor anything through that node, and must hold what they told producers.
    rig = make_rig(live_cluster, cluster_queues, qname, sidecars, receiver, steady_node=0)
    led = cluster_queues.declare(qname("led-by-stopped"), node=0, messages=1,
                                 arguments=QUORUM)
    assert rig.replicas[1].put(queue_path(led) + "/flow", json=STOP_4).status_code == 200
    for replica in rig.replicas:
        wait_depth(replica, led, 1)
    assert live_cluster.queue(led)["leader"].startswith("flowc10@")

    stopped_at = time.monotonic()
    live_cluster.nodes[0].stop()
    moment = time.monotonic()
    cluster_queues.publish(led, node=1, messages=4)  # waits for a new leader
    for index in range(3):
        rig.put(qname(f"put{index}"), 10 + index, rig.replicas)
    eventually(lambda: all(flow(r, led)["flowStopped"] for r in rig.replicas), 60)
    change_seen = time.monotonic() - moment
    while time.monotonic() - stopped_at < 45:
        rig.episode(rig.replicas, node=1)
    assert all(flow(r, rig.steady_on)["stale"] for r in rig.replicas)  # held, not flipped
    time.sleep(max(0.0, 60 - (time.monotonic() - stopped_at)))
    live_cluster.ensure()  # the node comes back and rejoins
    eventually(lambda: not any(flow(r, rig.steady_on)["stale"] for r in rig.replicas), 60)
    rig.episode(rig.replicas, node=0)
    silence = rig.figures("one RabbitMQ node stopped for 60 s", stopped_at, change_seen)
    assert silence < 5.0
