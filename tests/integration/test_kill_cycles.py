"""kill -9 at random moments loses nothing acknowledged: a real sidecar is killed mid PUT
bursts, mid subscription and webhook bursts, and once during start-up; after every restart
each acknowledged PUT and subscription is there, `flowStoppedCount` never went back and
the SQLite file passes `PRAGMA integrity_check`. (A bounded run of what the fault probes
did 30 times.)"""

from __future__ import annotations

import random
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known, wait_depth
from tests.utils.paths import queue_path
from tests.utils.sidecar_process import SidecarProcess, eventually
from tests.utils.webhook_receiver import WebhookReceiver

CYCLES = 4
TOKEN = "kill-cycle-token"
SECRET = "kill-cycle-webhook-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver(SECRET).start()
    yield made
    made.stop()


class Burst(threading.Thread):
    """Writes as fast as the sidecar answers until it dies: settings PUTs to fresh keys,
    threshold flips on a real queue (each a transition with webhook events), and new
    subscriptions. Records what was acknowledged."""

    def __init__(self, sidecar: SidecarProcess, cycle: int, queue: str, hook_url: str):
        super().__init__(daemon=True)
        self.url, self.cycle, self.queue, self.hook_url = sidecar.url, cycle, queue, hook_url
        self.puts: dict[str, int] = {}
        self.subscriptions: set[str] = set()
        self.counts: list[int] = []

    def run(self) -> None:
        http = requests.Session()
        http.headers.update(AUTH)
        n = 0
        try:
            while True:
                n += 1
                key = f"kill-cycle-{self.cycle}-{n}"
                r = http.put(f"{self.url}{queue_path(key)}/flow",
                             json={"qpid.flow_stop_count": n}, timeout=5)
                if r.status_code == 200:
                    self.puts[key] = n
                if n % 3 == 0:
                    stop = 3 if n % 6 == 0 else 10  # depth 5: flips the queue on and off
                    r = http.put(f"{self.url}{queue_path(self.queue)}/flow",
                                 json={"qpid.flow_stop_count": stop}, timeout=5)
                    if r.status_code == 200:
                        self.counts.append(r.json()["flowStoppedCount"])
                if n % 5 == 0:
                    r = http.post(f"{self.url}/webhooks", timeout=5, json={
                        "url": self.hook_url, "secret": SECRET, "queue": self.queue})
                    if r.status_code == 201:
                        self.subscriptions.add(r.json()["id"])
        except requests.RequestException:
            return  # killed


def integrity(sidecar: SidecarProcess) -> str:
    with sqlite3.connect(sidecar.data_dir / "flow-sidecar.sqlite3") as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def test_kill_9_at_random_moments_loses_nothing_acknowledged(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess],
        qname: Callable[[str], str], receiver: WebhookReceiver) -> None:
    rng = random.Random(20261122)
    sidecar = sidecar_factory("--poll-interval", "0.2", "--token", TOKEN,
                              "--webhook-allow-private", "--webhook-backoff-base", "0.05",
                              "--webhook-backoff-max", "0.2")
    sidecar.start()
    q = known(sidecar, broker.declare(qname("killed")))
    broker.publish(q, 5)
    wait_depth(sidecar, q, 5)
    puts: dict[str, int] = {}
    subscriptions: set[str] = set()
    counted = 0
    restarts: list[float] = []
    totals = {"puts": 0, "subscriptions": 0}
    for cycle in range(CYCLES):
        burst = Burst(sidecar, cycle, q, receiver.url)
        burst.start()
        time.sleep(rng.uniform(0.3, 1.2))
        sidecar.kill()
        burst.join(10)
        puts.update(burst.puts)
        subscriptions |= burst.subscriptions
        totals["puts"] += len(burst.puts)
        totals["subscriptions"] += len(burst.subscriptions)
        counted = max([counted, *burst.counts])
        assert integrity(sidecar) == "ok"

        if cycle == 1:  # once more, during start-up
            sidecar.start(wait_ready=False)
            time.sleep(rng.uniform(0.05, 0.5))
            sidecar.kill()
            assert integrity(sidecar) == "ok"
        started = time.monotonic()
        sidecar.start()
        restarts.append(time.monotonic() - started)

        stored = {item["queue"]: (item.get("settings") or {}).get("qpid.flow_stop_count")
                  for item in sidecar.get("/queues").json()}
        lost = {key: value for key, value in puts.items() if stored.get(key) != value}
        assert not lost, f"cycle {cycle}: acknowledged PUTs lost: {lost}"
        listed = {w["id"] for w in sidecar.get("/webhooks").json()}
        assert subscriptions <= listed, f"cycle {cycle}: lost {subscriptions - listed}"
        count = flow(sidecar, q)["flowStoppedCount"]
        assert count >= counted, f"cycle {cycle}: flowStoppedCount went back to {count}"
        counted = count

    def delivered() -> dict[str, Any] | None:
        pending = {w["id"]: w["deliveries"]["pending"] for w in sidecar.get("/webhooks").json()}
        return None if any(pending.values()) else pending
    assert totals["puts"] > 20 and totals["subscriptions"] > 2, totals
    eventually(delivered, timeout=30)  # every committed event is delivered in the end
    sidecar.stop()
    assert integrity(sidecar) == "ok"
    print(f"\n{CYCLES} kill -9 cycles: {totals['puts']} acknowledged PUTs and "
          f"{totals['subscriptions']} subscriptions kept, flowStoppedCount {counted}, "
          f"restart median {statistics.median(restarts):.2f} s")

