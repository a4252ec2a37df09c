"""Answers no healthy broker gives, read by the real RabbitMQ adapter from a fake
management API over loopback: they must never move a queue's flow state."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.flow import poller as poller_module
from sidecar.flow.slices import SLICE
from sidecar.signals.exchange_routing import Topology
from tests.api.conftest import InProcessAPI, ScriptedBroker
from tests.utils.fake_management import FakeManagement, fake_management, queue_page
from tests.utils.paths import flow_path

pytestmark = pytest.mark.anyio
LIMITS = {"qpid.flow_stop_count": 10, "qpid.flow_resume_count": 5}


@pytest.fixture
def fake() -> Iterator[FakeManagement]:
    with fake_management() as running:
        yield running


def report(fake: FakeManagement, **depths: Any) -> None:
    """Each named queue with `messages` as given (bytes 1 per message when an int)."""
    fake.answers["/api/queues"] = queue_page([
        {"name": name, "vhost": "/", "messages": messages, "arguments": LIMITS,
         "message_bytes": messages if isinstance(messages, int) else 0,
         "messages_unacknowledged": 0}
        for name, messages in depths.items()])


async def sidecar_over(make_api: Any, fake: FakeManagement, **options: Any) -> InProcessAPI:
    adapter = RabbitMQAdapter(fake.url, "guest", "guest",
                              timeout=options.get("request_timeout", 2.0))
    made: InProcessAPI = await make_api(broker=adapter, **options)
    return made


async def flow(api: InProcessAPI, queue: str) -> dict[str, Any]:
    answer: dict[str, Any] = (await api.client.get(flow_path(queue))).json()
    return answer


@pytest.mark.parametrize("bad", [-5, 10**30, 3.0, "5", None, True])
async def test_an_impossible_depth_moves_no_queue_and_is_logged(
        make_api: Any, fake: FakeManagement, bad: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    api = await sidecar_over(make_api, fake, stale_after=0.3)
    report(fake, stopped=20, flowing=0)
    await api.poll()
    assert (await flow(api, "stopped"))["flowStopped"] is True
    assert (await flow(api, "flowing"))["flowStopped"] is False

    report(fake, stopped=bad, flowing=bad)
    with caplog.at_level(logging.WARNING, "flow_sidecar.broker"):
        await api.poll()
        await api.poll()
    stopped, flowing = await flow(api, "stopped"), await flow(api, "flowing")
    assert stopped["flowStopped"] is True and stopped["flowStoppedCount"] == 1
    assert flowing["flowStopped"] is False and flowing["flowStoppedCount"] == 0
    warnings = [r.getMessage() for r in caplog.records if "impossible depth" in r.getMessage()]
    assert len(warnings) == 1, warnings  # throttled: two polls, two queues, one line
    assert "messages=" in warnings[0]
    health = (await api.client.get("/healthz")).json()["poller"]
    assert health["refusedFigures"] == 4 and "messages=" in health["lastRefusedFigure"]

    await asyncio.sleep(0.35)
    await api.poll()
    assert (await flow(api, "stopped"))["stale"] is True  # no sample: it ages

    report(fake, stopped=20, flowing=0)
    await api.poll()
    stopped = await flow(api, "stopped")
    assert stopped["flowStopped"] is True and stopped["stale"] is False
    assert stopped["flowStoppedCount"] == 1  # no release and stop again in between


def nodes(*listed: dict[str, Any]) -> list[dict[str, Any]]:
    return list(listed)


A_DISK = {"name": "rabbit@a", "running": True, "mem_alarm": False, "disk_free_alarm": True}
A_CLEAR = {**A_DISK, "disk_free_alarm": False}
B_CLEAR = {"name": "rabbit@b", "running": True, "mem_alarm": False, "disk_free_alarm": False}


@pytest.mark.parametrize("bad_list", [nodes(), nodes(B_CLEAR), {"error": "no list"}])
async def test_a_node_list_without_the_alarmed_node_clears_nothing(
        make_api: Any, fake: FakeManagement, bad_list: Any) -> None:
    api = await sidecar_over(make_api, fake)
    report(fake, q=0)
    fake.answers["/api/nodes"] = nodes(A_DISK, B_CLEAR)
    await api.poll()
    assert (await flow(api, "q"))["flowStopped"] is True  # the disk alarm stops it

    fake.answers["/api/nodes"] = bad_list
    await api.poll()
    assert (await flow(api, "q"))["flowStopped"] is True
    alarms = (await api.client.get("/alarms")).json()
    assert [a["node"] for a in alarms["alarms"]] == ["rabbit@a"]
    assert alarms["lastError"]  # said, and kept until a good read

    fake.answers["/api/nodes"] = nodes(A_CLEAR, B_CLEAR)  # a true clear still clears
    await api.poll()
    assert (await flow(api, "q"))["flowStopped"] is False
    assert (await api.client.get("/alarms")).json()["lastError"] is None


@pytest.mark.parametrize("lacks", ["vhost", "destination", "destination_type"])
async def test_a_malformed_binding_is_a_503_not_a_500(
        make_api: Any, fake: FakeManagement, lacks: str) -> None:
    api = await sidecar_over(make_api, fake)
    report(fake, q=0)
    fake.answers["/api/exchanges"] = [{"name": "x", "vhost": "/", "type": "direct"}]
    binding = {"vhost": "/", "source": "x", "destination": "q", "destination_type": "queue",
               "routing_key": "k"}
    fake.answers["/api/bindings"] = [{k: v for k, v in binding.items() if k != lacks}]
    await api.poll()

    for method, path, body in (("GET", "/flow/exchange/%2F/x", None),
                               ("POST", "/grants/exchange/%2F/x", {"messages": 1})):
        r = await api.client.request(method, path, params={"routing_key": "k"}, json=body)
        assert r.status_code == 503, r.text
        assert lacks in r.json()["detail"]


async def test_an_adapter_crashing_on_the_bindings_is_a_503(make_api: Any) -> None:
    class Crashing(ScriptedBroker):
        def fetch_topology(self) -> Topology:
            raise KeyError("destination")

    api: InProcessAPI = await make_api(broker=Crashing())
    api.broker.queue("q")
    await api.poll()
    r = await api.client.get("/flow/exchange/%2F/x")
    assert r.status_code == 503 and "KeyError" in r.json()["detail"]


async def test_queue_items_without_string_names_are_left_out_and_logged(
        make_api: Any, fake: FakeManagement, caplog: pytest.LogCaptureFixture) -> None:
    api = await sidecar_over(make_api, fake)
    fake.answers["/api/queues"] = queue_page([
        {"name": ["x"], "vhost": "/", "messages": 1}, {"name": "y", "vhost": None},
        "junk", {"name": "ok", "vhost": "/", "messages": 0}])
    with caplog.at_level(logging.WARNING, "flow_sidecar.broker"):
        await api.poll()
    listed = (await api.client.get("/queues")).json()
    assert [(q["vhost"], q["queue"]) for q in listed] == [("/", "ok")]
    assert any("without string" in r.getMessage() for r in caplog.records)


async def test_an_answer_trickling_in_fails_the_poll_within_its_deadline(
        make_api: Any, fake: FakeManagement) -> None:
    api = await sidecar_over(make_api, fake, request_timeout=0.5)  # answers: 2 s at most
    report(fake, q=20)
    await api.poll()
    fake.trickle = 0.05  # a byte every 50 ms: no read timeout ever fires
    started = time.monotonic()
    await api.poll()
    took = time.monotonic() - started
    assert took < 4, f"the poll took {took:.1f} s"
    health = (await api.client.get("/healthz")).json()["poller"]
    assert "took over 2 s" in health["lastPollError"] and health["consecutiveFailures"] == 1
    assert (await flow(api, "q"))["flowStopped"] is True  # state kept


async def test_a_poll_still_running_past_its_deadline_is_reported(
        make_api: Any, fake: FakeManagement) -> None:
    api = await sidecar_over(make_api, fake, request_timeout=0.5)
    report(fake, q=20)
    await api.poll()
    api.sidecar.runtime.poller.read_deadline = 0.3
    fake.trickle = 0.02
    fake.answers["/api/queues"] = queue_page([  # long enough to take over 0.3 s, under 2 s
        {"name": "q", "vhost": "/", "messages": 20, "message_bytes": 20,
         "arguments": LIMITS, "pad": "x" * 30}])
    poll = asyncio.create_task(api.poll())
    seen = None
    for _ in range(100):
        await asyncio.sleep(0.05)
        seen = (await api.client.get("/healthz")).json()["poller"]["lastPollError"]
        if seen or poll.done():
            break
    assert seen and "still running after 0.3 s" in seen
    await poll


@pytest.mark.parametrize(("pages", "said"), [
    (1_000, "does not fit total_count=1"), (10**9, "no page count"),
    ("2", "no page count"), (2.0, "no page count"), (-1, "no page count")])
async def test_an_impossible_page_count_fails_the_poll_once_logged(
        make_api: Any, fake: FakeManagement, pages: Any, said: str,
        caplog: pytest.LogCaptureFixture) -> None:
    api = await sidecar_over(make_api, fake)
    body = queue_page([{"name": "q", "vhost": "/", "messages": 0, "arguments": LIMITS}])
    fake.answers["/api/queues"] = {**body, "page_count": pages}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await asyncio.wait_for(api.poll(), 10)
    health = (await api.client.get("/healthz")).json()["poller"]
    assert said in health["lastPollError"] and health["consecutiveFailures"] == 3
    assert fake.asked.count("/api/queues") <= 3  # no paging on
    lines = [r for r in caplog.records if "page_count" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None


async def test_the_loop_runs_between_a_polls_snapshot_hooks(make_api: Any) -> None:
    """With 100,000 queues each hook holds the loop for seconds: /flow must be answered
    between them, not only after the last."""
    api: InProcessAPI = await make_api()
    api.broker.queue("q")
    order: list[str] = []
    hooks = api.sidecar.runtime.poller.on_snapshot
    hooks.insert(0, lambda queues, now: order.append("first"))
    hooks.append(lambda queues, now: order.append("last"))

    async def other_requests() -> None:
        while "last" not in order:
            order.append("tick")
            await asyncio.sleep(0)

    ticking = asyncio.create_task(other_requests())
    await asyncio.sleep(0)
    await api.poll()
    await ticking
    between = order[order.index("first") + 1:order.index("last")]
    assert "tick" in between, order


async def test_the_loop_runs_within_a_polls_apply_and_its_hooks(
        make_api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 10,000 queues the apply and each hook hold the loop for 20-300 ms in one go:
    they give it a turn every slice (sidecar.flow.slices), here after every one."""
    monkeypatch.setattr(poller_module, "SLICE_SECONDS", 0.0)
    api: InProcessAPI = await make_api()
    for i in range(10 * SLICE):
        api.broker.queue(f"q{i}", i % 3)
    applied: list[int] = []
    engine = api.sidecar.runtime.engine
    hooks = api.sidecar.runtime.poller.on_snapshot
    hooks.insert(0, lambda queues, now: applied.append(-1))  # the apply is over
    ticks_during_apply = 0

    async def other_requests() -> None:
        nonlocal ticks_during_apply
        while not applied:
            if engine.queue_count():  # the poll's first queues are in
                ticks_during_apply += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(other_requests())
    await asyncio.sleep(0)
    await api.poll()
    await ticking
    assert ticks_during_apply >= 10, ticks_during_apply  # one a slice, at least
    assert engine.queue_count() == 10 * SLICE
