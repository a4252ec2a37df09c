"""The pure rules of shared state: parameter names and values, the counter floor, episode
numbering and stable webhook ids, and the delivering replica's view of the queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pika  # type: ignore[import-untyped]
import pytest
from pydantic import SecretStr

from api.store import Store
from sidecar.cluster.shared_outbox import (
    SharedOutbox,
    episode_sequence,
    stable_message_id,
    warning_token,
)
from sidecar.cluster.shared_view import (
    COUNTER,
    DEFAULTS,
    SETTINGS,
    WARNING,
    WEBHOOK,
    SharedCounter,
    counter_floor,
    counter_parameter,
    digest,
    episode_floor,
    parse,
    settings_parameter,
    webhook_parameter,
)
from sidecar.cluster.webhook_queue import QueueOutbox
from sidecar.cluster.wiring import amqp_endpoints
from sidecar.config import Settings
from sidecar.flow.fill_rate import WarningEvent, WarningKind
from sidecar.flow.forecast import WarningNote
from sidecar.flow.state_machine import Depth, EventKind, FlowEvent, Thresholds
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import Change
from sidecar.signals.webhook_outbox import Outcome, Subscription


def test_names_are_short_and_stable_whatever_the_queue_is_called() -> None:
    long_name = ("ü/ " * 200, "q" * 255)
    assert len(SETTINGS + digest(long_name)) < 255  # the broker makes names atoms
    assert digest(("/", "a")) == digest(("/", "a")) != digest(("/a", ""))


def test_parse_reads_back_what_was_written_and_skips_what_was_not() -> None:
    key = ("/", "orders")
    sub = Subscription("wh_1", "http://h/x", "secret", "*", "orders*", True, None, 5.0)
    written = dict([
        settings_parameter(key, {"qpid.flow_stop_count": 900}),
        settings_parameter(("v", "empty"), {}),
        counter_parameter(key, SharedCounter(3, True, 10.0)),
        counter_parameter(key, SharedCounter(7, False, 11.0), warning=True),
        (WARNING + "bad", {"vhost": "/", "queue": "x", "count": 1, "stopped": True, "at": 1}),
        webhook_parameter(sub),
        (DEFAULTS, {"stop_percent": 50, "resume_percent": 40, "queue_limit": 0}),
        (SETTINGS + "bad", {"vhost": "/", "queue": "x", "settings": {"qpid.flow_stop_count": "9"}}),
        (COUNTER + "bad", {"vhost": "/", "queue": "x", "count": 1}),
        (WEBHOOK + "wh_2", {**webhook_parameter(sub)[1]}),  # its id is not its name's
    ])
    written[SETTINGS + digest(("v", "empty"))]["settings"] = []  # as the broker lists {}
    view = parse(written)
    assert view.settings == {key: {"qpid.flow_stop_count": 900}, ("v", "empty"): {}}
    assert view.counters == {key: SharedCounter(3, True, 10.0)}
    assert view.warnings == {key: SharedCounter(7, False, 11.0)}
    assert written[WARNING + digest(key)]["warned"] is False  # readable as what it is
    assert view.webhooks == {"wh_1": sub}
    assert view.defaults == DefaultPolicy(50, 40, 0)
    assert len(view.problems) == 4


@pytest.mark.parametrize("stopped, shared, now, floor", [
    (True, SharedCounter(5, True, 100.0), 101.0, 5),  # same episode: take its number
    (True, SharedCounter(5, False, 100.0), 101.0, 5),  # the other saw it end first
    (False, SharedCounter(5, True, 100.0), 101.0, 4),  # our OFF->ON will count that one
    (False, SharedCounter(5, False, 100.0), 101.0, 4),  # ended just now: we may be late
    (False, SharedCounter(5, False, 100.0), 200.0, 5),  # ended long ago: we missed it
])
def test_counter_floor(stopped: bool, shared: SharedCounter, now: float, floor: int) -> None:
    assert counter_floor(shared, stopped, now, join_window=4.0) == floor


@pytest.mark.parametrize("shared, now, floor", [
    (None, 100.0, 0),  # no replica recorded an episode
    (SharedCounter(5, True, 100.0), 101.0, 4),  # another replica is in episode 5: join it
    (SharedCounter(5, False, 100.0), 101.0, 4),  # it ended just now: we may be late to it
    (SharedCounter(5, False, 100.0), 200.0, 5),  # ended long ago: ours is the 6th
])
def test_episode_floor(shared: SharedCounter | None, now: float, floor: int) -> None:
    assert episode_floor(shared, now, join_window=4.0) == floor


def event(kind: EventKind, count: int) -> FlowEvent:
    return FlowEvent(kind, Depth(0, 0), Thresholds(), count)


@pytest.mark.parametrize("change, sequence", [
    (Change("/", "q", 1, True, event(EventKind.OVERFULL, 3), "", 3), 5),
    (Change("/", "q", 2, False, event(EventKind.UNDERFULL, 3), "", 3), 6),
    (Change("/", "q", 3, False, None, "queue deleted", 3), 6),
    (Change("/", "q", 4, True, None, "data stale", 3), None),  # one replica's own view
])
def test_events_are_numbered_by_episode(change: Change, sequence: int | None) -> None:
    assert episode_sequence(change) == sequence


def test_every_replica_gives_an_event_the_same_webhook_id() -> None:
    assert stable_message_id("wh_1", ("/", "q"), 5) == stable_message_id("wh_1", ("/", "q"), 5)
    tokens = [1, 2, warning_token(WarningKind.STARTED, 1), warning_token(WarningKind.ENDED, 1),
              warning_token(WarningKind.STARTED, 2)]
    assert len({stable_message_id(s, ("/", q), n) for s in ("wh_1", "wh_2")
                for q in ("q", "r") for n in tokens}) == 20


def test_each_replica_queues_its_copy_of_a_warning_under_one_webhook_id(
        tmp_path: Path) -> None:
    key = ("/", "fills")
    sub = Subscription("wh_1", "http://127.0.0.1:9/a", "s", "*", "*", True, None, 1.0, True)
    copies = []
    for replica in ("a", "b"):
        outbox = SharedOutbox(Store(tmp_path / f"{replica}.db"), lambda c, s, n: {"s": s})
        outbox.adopt({sub.id: sub})
        outbox.on_change(Change("/", "fills", 1, True, event(EventKind.OVERFULL, 2), "", 2))
        for kind, at in ((WarningKind.STARTED, 10.0), (WarningKind.ENDED, 40.0)):
            outbox.on_warning(WarningNote(key, WarningEvent(kind, at, 3, 10.0), None, None,
                                          None))
        copies.append([(r.msg_id, r.sequence) for r in outbox.to_forward(10)])
    assert copies[0] == copies[1] and len({m for m, _ in copies[0]}) == 3
    assert [s for _, s in copies[0]] == [3, 3, 3]  # warnings carry the stop's sequence


class Link:
    """What QueueOutbox needs of the AMQP link: acknowledgements, recorded."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int]] = []

    def ack(self, generation: int, tag: int) -> None:
        self.acked.append((generation, tag))


def message(msg_id: str, sequence: int, sub: str = "wh_1") -> tuple[Any, bytes]:
    props = pika.BasicProperties(message_id=msg_id, headers={
        "subscription": sub, "vhost": "/", "queue": "q", "sequence": sequence,
        "created_at": "100.0"})
    return props, b'{"x": 1}'


@pytest.fixture
def held(tmp_path: Path) -> tuple[QueueOutbox, Link, list[str]]:
    outbox = SharedOutbox(Store(tmp_path / "db.sqlite3"), lambda c, s, n: {})
    outbox.save(Subscription("wh_1", "http://h/x", "s", "*", "*", True, None, 1.0))
    link, disabled = Link(), []
    queue = QueueOutbox(outbox, ack=link.ack, disable=lambda sub, why: disabled.append(sub),
                        clock=lambda: 200.0)
    queue.reset(1)
    return queue, link, disabled


def test_copies_of_an_event_are_acknowledged_without_a_post(
        held: tuple[QueueOutbox, Link, list[str]]) -> None:
    queue, link, _ = held
    queue.receive(1, 10, *message("m1", 1))
    queue.receive(1, 11, *message("m1", 1))  # another replica's copy, while m1 waits
    queue.receive(1, 12, *message("m2", 2))
    assert [r.msg_id for r in queue.heads()] == ["m1"]  # one stream: in order
    assert link.acked == [(1, 11)]
    queue.record(queue.heads()[0], Outcome.DELIVERED, at=201.0, http_status=204, error=None)
    queue.receive(1, 13, *message("m1", 1))  # a third copy, after delivery
    assert link.acked == [(1, 11), (1, 10), (1, 13)]
    assert [r.msg_id for r in queue.heads()] == ["m2"]
    assert queue.duplicates == 2


def test_a_new_connection_drops_what_was_held_but_remembers_what_was_done(
        held: tuple[QueueOutbox, Link, list[str]]) -> None:
    queue, link, _ = held
    queue.receive(1, 10, *message("m1", 1))
    in_flight = queue.heads()[0]
    queue.reset(2)  # the broker gives m1 again, on the new connection
    queue.record(in_flight, Outcome.DELIVERED, at=201.0, http_status=200, error=None)
    assert link.acked == []  # its tag died with the old connection
    queue.receive(1, 10, *message("m0", 1))  # late, from the old connection: ignored
    queue.receive(2, 1, *message("m1", 1))
    assert link.acked == [(2, 1)] and queue.heads() == []


def test_retries_stay_at_the_head_and_410_disables(
        held: tuple[QueueOutbox, Link, list[str]]) -> None:
    queue, link, disabled = held
    queue.receive(1, 10, *message("m1", 1))
    queue.record(queue.heads()[0], Outcome.RETRY, at=201.0, http_status=500, error="HTTP 500",
                 next_attempt_at=205.0)
    head = queue.heads()[0]
    assert (head.msg_id, head.attempts, head.next_attempt_at) == ("m1", 1, 205.0)
    queue.record(head, Outcome.GONE, at=206.0, http_status=410, error="HTTP 410")
    assert disabled == ["wh_1"] and link.acked == []


def test_events_of_an_unknown_subscription_wait_then_go(tmp_path: Path,
                                                        held: tuple[QueueOutbox, Link,
                                                                    list[str]]) -> None:
    queue, link, _ = held
    queue.receive(1, 10, *message("m1", 1, sub="wh_new"))  # not synced here yet
    assert queue.heads() == [] and link.acked == []
    queue.clock = lambda: 400.0  # long past the grace: deleted meanwhile
    assert queue.heads() == [] and link.acked == [(1, 10)]


def test_the_delivery_queue_is_reached_on_the_management_hosts_by_default() -> None:
    settings = Settings(management_url=["http://rabbit-0.svc:15672", "http://rabbit-1.svc"],
                        management_user="flow", management_password=SecretStr("pw"))
    assert [(e.host, e.port, e.virtual_host) for e in amqp_endpoints(settings)] == [
        ("rabbit-0.svc", 5672, "/"), ("rabbit-1.svc", 5672, "/")]
    given = settings.model_copy(update={"shared_amqp_url": ["amqp://a:5710", "b:5711"],
                                        "shared_vhost": "flow"})
    endpoints = amqp_endpoints(given)
    assert [(e.host, e.port, e.virtual_host) for e in endpoints] == [
        ("a", 5710, "flow"), ("b", 5711, "flow")]
    assert endpoints[0].credentials.username == "flow"
