"""Live depth in process: the real app over a scripted broker whose live source answers
what the test put in it. A test runs live rounds itself (`await live.round()`); the source
is still called from the sampler's own thread, as in production."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest
from pydantic import ValidationError

from api.main import build, load_settings
from sidecar.broker import LiveBatch
from sidecar.config import Settings
from sidecar.flow.live_sampler import LiveSampler
from sidecar.model import LiveSample, QueueKey
from tests.api.conftest import InProcessAPI, ScriptedBroker

pytestmark = pytest.mark.anyio


class ScriptedLive:
    """A live source: ready counts set by the test, or a failure."""

    def __init__(self) -> None:
        self.ready: dict[QueueKey, int | None] = {}
        self.failure: str | None = None
        self.asked: list[list[QueueKey]] = []
        self.threads: set[str] = set()

    def sample(self, keys: Sequence[QueueKey]) -> LiveBatch:
        self.asked.append(list(keys))
        self.threads.add(threading.current_thread().name)
        if self.failure:
            return LiveBatch([], self.failure)
        now = time.time()  # dated before the answer, as a real declare is
        return LiveBatch([LiveSample(v, n, self.ready.get((v, n), 0), now, 0) for v, n in keys])

    def close(self) -> None:
        pass


class Live(InProcessAPI):
    """An in-process sidecar (from `make_api`) with its scripted live source."""

    def __init__(self, api: InProcessAPI, source: ScriptedLive) -> None:
        super().__init__(api.sidecar, api.broker, api.client)
        assert api.sidecar.runtime.live is not None
        self.sampler: LiveSampler = api.sidecar.runtime.live
        self.source = source

    async def flow(self, queue: str, **headers: str) -> dict[str, Any]:
        answer = await self.client.get(f"/flow/{queue}", headers=headers)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body


async def make_live(make_api: Callable[..., Any], **options: Any) -> Live:
    source = ScriptedLive()
    return Live(await make_api(live_source=source, **options), source)


@pytest.fixture
async def live(make_api: Callable[..., Any]) -> Live:
    return await make_live(make_api)


async def test_a_live_sample_reaches_flow_and_wakes_a_waiter(live: Live) -> None:
    live.broker.queue("orders", 0, 0, arguments={"qpid.flow_stop_count": 5})
    await live.poll()
    before = await live.flow("orders", **{"X-Producer-Id": "p1"})  # producers make it hot
    assert (before["depthSource"], before["flowStopped"]) == ("statistics", False)
    waiter = asyncio.create_task(live.client.get(
        f"/flow/orders?since={before['version']}&wait=5"))
    await asyncio.sleep(0.05)
    live.source.ready[("/", "orders")] = 6
    await live.sampler.round()
    woken = (await asyncio.wait_for(waiter, 2)).json()
    after = await live.flow("orders")  # the cached body moved with the revision
    for answer in (woken, after):
        assert answer["flowStopped"] and answer["depth"]["messages"] == 6
        # the statistics saw it only empty: their 0 bytes are of another count, shown as
        # an estimate (a figure is never shown as the broker's below what is known)
        assert answer["depthSource"] == "live" and answer["bytesEstimated"] is True
    assert live.source.threads == {"live-depth"}  # never the event loop's thread


async def test_only_hot_queues_are_asked_closest_first_within_the_budget(
        make_api: Callable[..., Any]) -> None:
    live = await make_live(make_api, live_budget=40.0, live_interval=0.05)  # 2 calls a round
    # distances: stopped 0.02 (to fall under its resume of 100), near 0.06, close 0.16,
    # cold 1.01 (not hot), far above its resume 1.01
    # count only, no consumers: a live sample could release the stopped ones
    for name, depth in [("cold", 0), ("near", 95), ("stopped", 101), ("close", 85),
                        ("far above", 200)]:
        live.broker.queue(name, depth, 0, unacked=0, consumers=0, unacked_limit=0,
                          arguments={"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 0})
    await live.poll()
    live.sampler.rescan()
    await live.sampler.round()
    assert live.source.asked == [[("/", "stopped"), ("/", "near")]]


async def test_a_source_that_cannot_connect_changes_nothing_and_says_so(live: Live) -> None:
    live.broker.queue("orders", 6, 60, arguments={"qpid.flow_stop_count": 5})
    await live.poll()
    live.sampler.rescan()
    live.source.failure = "vhost '/': AMQPConnectionError: refused"
    await live.sampler.round()
    answer = await live.flow("orders")
    assert answer["flowStopped"] and answer["depthSource"] == "statistics"
    health = (await live.client.get("/healthz")).json()["live"]
    assert health["enabled"] and not health["connected"]
    assert "refused" in health["lastError"] and health["errors"] == 1
    metrics = (await live.client.get("/metrics")).text
    assert "flow_sidecar_live_connected 0.0" in metrics
    live.broker.queue("orders", 2, 20, arguments={"qpid.flow_stop_count": 5})
    await live.poll()  # statistics alone still move it
    assert not (await live.flow("orders"))["flowStopped"]
    live.source.failure = None
    await live.flow("orders", **{"X-Producer-Id": "p"})  # hot again: asked next round
    await live.sampler.round()
    assert (await live.client.get("/healthz")).json()["live"]["connected"]


async def test_a_gone_queue_does_not_hold_up_the_others(live: Live) -> None:
    for name in ("gone", "kept"):
        live.broker.queue(name, 0, 0, arguments={"qpid.flow_stop_count": 5})
    await live.poll()
    for name in ("gone", "kept"):
        await live.flow(name, **{"X-Producer-Id": "p"})
    live.source.ready.update({("/", "gone"): None, ("/", "kept"): 9})
    await live.sampler.round()
    assert (await live.flow("kept"))["flowStopped"]
    gone = await live.flow("gone")
    assert gone["depthSource"] == "statistics" and not gone["flowStopped"]


async def test_nothing_watched_only_keeps_the_connection_alive(live: Live) -> None:
    live.broker.queue("orders", 0, 0, arguments={"qpid.flow_stop_count": 0,
                                                 "qpid.flow_stop_size": 0})  # disabled
    await live.poll()
    live.sampler.rescan()
    for _ in range(3):
        await live.sampler.round()
    assert live.source.asked == [[]]  # one keep-alive call a second, nothing to read


async def test_the_budget_left_over_reads_every_other_queue_in_turn(
        make_api: Callable[..., Any]) -> None:
    """Idle queues far from their stop are not hot, yet a burst into one must be seen at
    live speed: the tokens the hot set leaves go round every watched queue."""
    live = await make_live(make_api, live_budget=60.0, live_interval=0.05)  # 3 calls a round
    live.broker.queue("hot", 95, 0, arguments={"qpid.flow_stop_count": 100})
    for name in ("idle-a", "idle-b", "idle-c", "idle-d"):
        live.broker.queue(name, 0, 0, arguments={"qpid.flow_stop_count": 100})
    live.broker.queue("off", 0, 0, arguments={"qpid.flow_stop_count": 0,
                                               "qpid.flow_stop_size": 0})
    await live.poll()
    live.sampler.rescan()
    for _ in range(3):
        await live.sampler.round()
        await asyncio.sleep(0.05)  # the budget's tokens come back
    asked = [key[1] for keys in live.source.asked for key in keys]
    assert asked[0] == "hot" and "off" not in asked
    assert {"idle-a", "idle-b", "idle-c", "idle-d"} <= set(asked)
    live.source.ready[("/", "idle-c")] = 150  # a burst into an idle queue
    for _ in range(3):
        await live.sampler.round()
        await asyncio.sleep(0.05)
    assert (await live.flow("idle-c"))["flowStopped"]
    health = (await live.client.get("/healthz")).json()["live"]
    assert health["watchedQueues"] == 5 and health["fullPassSeconds"] is not None
    lag = (await live.client.get("/healthz")).json()["statisticsLag"]
    assert lag["configured"] == lag["effective"] and lag["measured"] is None


async def test_the_idle_queues_get_no_more_than_the_idle_budget(
        make_api: Callable[..., Any]) -> None:
    """Each read of an idle queue costs the broker as much as a hot one: the rotation gets
    --live-idle-budget of the tokens, the hot set the rest, every round."""
    live = await make_live(make_api, live_budget=400.0, live_idle_budget=20.0,
                           live_interval=0.05)  # 20 calls a round, 1 of them idle
    live.broker.queue("hot", 95, 0, arguments={"qpid.flow_stop_count": 100})
    idle = [f"idle-{i}" for i in range(8)]
    for name in idle:
        live.broker.queue(name, 0, 0, arguments={"qpid.flow_stop_count": 100})
    await live.poll()
    live.sampler.rescan()
    for _ in range(4):
        await live.sampler.round()
        await asyncio.sleep(0.05)
    rounds = [[key[1] for key in keys] for keys in live.source.asked]
    assert all("hot" in asked for asked in rounds)
    assert all(len(asked) - 1 <= 2 for asked in rounds), rounds  # two rounds' worth at most
    assert 2 <= sum(len(asked) - 1 for asked in rounds) <= 6, rounds  # not 8 a round
    health = (await live.client.get("/healthz")).json()["live"]
    assert (health["budget"], health["idleBudget"]) == (400.0, 20.0)
    assert 'flow_sidecar_statistics_lag_seconds{kind="effective"}' in (
        await live.client.get("/metrics")).text


async def test_healthz_without_live_depth(tmp_path: Path) -> None:
    sidecar = build(Settings(data_dir=tmp_path, live_depth=False), ScriptedBroker(),
                    ScriptedLive())
    assert sidecar.runtime.live is None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sidecar.asgi),
                                 base_url="http://127.0.0.1:8080") as client:
        assert (await client.get("/healthz")).json()["live"]["enabled"] is False
    sidecar.runtime.recorder.close()
    sidecar.store.close()


def test_the_amqp_url_defaults_to_the_management_host_and_login() -> None:
    settings = Settings(management_url="http://[::1]:15672/", management_user="flow",
                        management_password="p@ss:w/rd")
    params = pika.URLParameters(settings.live_amqp_url)
    assert (params.host, params.port, params.virtual_host) == ("::1", 5672, "/")
    assert (params.credentials.username, params.credentials.password) == ("flow", "p@ss:w/rd")
    given = "amqps://u:secret@rabbit:5671/%2F"
    assert Settings(amqp_url=given).live_amqp_url == given
    with pytest.raises(ValidationError):
        Settings(amqp_url="http://u:secret@rabbit:15672/")


def test_a_bad_amqp_url_is_refused_without_echoing_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        load_settings(["--amqp-url", "http://u:secret@rabbit:15672/"])
    said = capsys.readouterr().err
    assert done.value.code == 2 and "amqp://" in said and "secret" not in said


async def test_a_round_that_ran_long_is_made_up_by_the_next(
        make_api: Callable[..., Any]) -> None:
    """2 declares a round at most (40 a second, every 0.05 s): a round that took 0.1 s
    (slow answers) leaves 4 tokens, not 2, so the budget is reached on average."""
    live = await make_live(make_api, live_budget=40.0, live_interval=0.05)
    for name, depth in [("near", 95), ("stopped", 101), ("close", 85), ("far above", 200)]:
        live.broker.queue(name, depth, 0, unacked=0, consumers=0, unacked_limit=0,
                          arguments={"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 0})
    await live.poll()
    now = [1000.0]
    live.sampler.clock = lambda: now[0]
    live.sampler.rescan()
    await live.sampler.round()
    now[0] += 0.1
    await live.sampler.round()
    assert [len(asked) for asked in live.source.asked] == [2, 4]


async def test_healthz_says_how_long_a_hot_queue_waits_between_two_reads(
        make_api: Callable[..., Any]) -> None:
    """10 hot queues, 2 declares a round every 0.05 s: each is read every 5 rounds, and the
    longest wait over the last whole 10 s says so (what an operator sets the budget by:
    1,000 hot queues each read every 250 ms need 4,000 a second). 0.05 s at 40 a second
    is 1.9999999 tokens in floats: counted as 1, a round fell a read short, and one queue
    waited a sixth round."""
    live = await make_live(make_api, live_budget=40.0, live_interval=0.05)
    for i in range(10):
        live.broker.queue(f"stopped-{i}", 101, 0, unacked=0, consumers=0, unacked_limit=0,
                          arguments={"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 0})
        live.source.ready[("/", f"stopped-{i}")] = 101  # they stay stopped, all as close
    await live.poll()
    now = [1000.0]
    live.sampler.clock = lambda: now[0]
    live.sampler.rescan()
    assert (await live.client.get("/healthz")).json()["live"]["hotReadGapSeconds"] is None
    for _ in range(int(12 / 0.05)):  # a whole window of 10 s, and some
        await live.sampler.round()
        now[0] += 0.05
    gap = (await live.client.get("/healthz")).json()["live"]["hotReadGapSeconds"]
    assert gap == pytest.approx(0.25)
    assert f"flow_sidecar_live_hot_read_gap_seconds {gap}" in (
        await live.client.get("/metrics")).text


async def test_a_confirmed_release_starts_the_next_live_round_at_once(
        make_api: Callable[..., Any]) -> None:
    """Credit released as confirmed leaves the ledger at the first upper bound read after
    the release: the sampler reads one then instead of at the end of its interval (30 s
    here); an unconfirmed release (it waits for the statistics' lag anyway) does not."""
    live = await make_live(make_api, live_interval=30.0)
    live.broker.queue("orders", 0, 0, unacked=0, consumers=0, unacked_limit=0,
                      arguments={"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 0})
    await live.poll()
    headers = {"X-Producer-Id": "p1"}
    running = asyncio.create_task(live.sampler.run())
    try:
        await asyncio.sleep(0.2)
        assert len(live.source.asked) == 1  # the round the run starts with
        for confirmed, rounds in ((False, 1), (True, 2)):
            made = (await live.client.post("/grants/%2F/orders", json={"messages": 10},
                                           headers=headers)).json()
            assert made["grantId"] is not None, made
            r = await live.client.post("/grants/release", headers=headers, json={"grants": [
                {"grantId": made["grantId"], "usedMessages": 10, "confirmed": confirmed}]})
            assert r.json()["released"] == 1
            await asyncio.sleep(0.3)
            assert len(live.source.asked) == rounds
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


async def test_a_round_earns_its_tokens_by_the_schedule_not_by_a_late_clock_read(
        make_api: Callable[..., Any]) -> None:
    """`run` starts a round at least an interval after the last, but the sampler reads its
    clock a moment into the round: 0.3 ms later in some rounds than in others. Tokens
    earned by those reads left a round a read short and one hot queue a fifth round (250 ms
    where its turn was every fourth, 200 ms, in the 1,000-queue bench); earned by the
    schedule's `elapsed`, every queue waits exactly its turn."""
    live = await make_live(make_api, live_budget=40.0, live_interval=0.05)
    for i in range(8):
        live.broker.queue(f"stopped-{i}", 101, 0, unacked=0, consumers=0, unacked_limit=0,
                          arguments={"qpid.flow_stop_count": 100, "qpid.flow_stop_size": 0})
        live.source.ready[("/", f"stopped-{i}")] = 101
    await live.poll()
    late = [0.0]
    live.sampler.clock = lambda: 1000.0 + late[0]
    live.sampler.rescan()
    waits = []
    for n in range(80):
        late[0] = n * 0.05 + (0.0003 if n % 3 == 0 else 0.0)  # each third read late
        before = dict(live.sampler._asked)
        await live.sampler.round(None if n == 0 else 0.05)
        waits += [live.sampler._asked[k] - t for k, t in before.items()
                  if live.sampler._asked[k] != t]
    assert max(waits) < 4 * 0.05 + 0.001, max(waits)  # 8 queues, 2 a round: every fourth
