"""Who filled it, against the real broker: a producer that reports its count
(`X-Producer-Published`) fills a queue until it stops; the queue's answer names it first
in `topProducers`, and the stop's QUE-1003 line names it after Qpid's words."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known
from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess, eventually


def report(sidecar: SidecarProcess, queue: str, producer: str, published: int) -> None:
    r = sidecar.get(flow_path(queue), headers={"X-Producer-Id": producer,
                                               "X-Producer-Published": str(published)})
    assert r.status_code == 200, r.text


def test_a_stopped_queue_names_who_filled_it(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess) -> None:
    q = known(shared_sidecar, broker.declare(qname("filled"), {
        "x-max-length": 1000, "x-overflow": "reject-publish",
        "qpid.flow_stop_count": 50, "qpid.flow_resume_count": 20}))
    assert shared_sidecar.get(f"/queues/%2F/{quote(q, safe='')}").json()["topProducers"] is None
    report(shared_sidecar, q, "bystander", 0)
    published = 0
    report(shared_sidecar, q, "filler-7", published)
    while not flow(shared_sidecar, q)["flowStopped"]:
        assert published < 400, "the queue never stopped"
        broker.publish(q, 10)
        published += 10
        report(shared_sidecar, q, "filler-7", published)
        report(shared_sidecar, q, "bystander", published // 10)
        time.sleep(0.2)
    top = eventually(lambda: shared_sidecar.get(
        f"/queues/%2F/{quote(q, safe='')}").json()["topProducers"])
    assert [p["producer"] for p in top] == ["filler-7", "bystander"], top
    assert top[0]["class"] is None and top[0]["messages"] >= 40, top
    assert top[0]["share"] > 0.85
    line = eventually(lambda: next((line for line in shared_sidecar.log().splitlines()
                                    if f"qu({q})] QUE-1003 : Overfull" in line), None))
    assert " - top producers: filler-7 " in line and ", bystander " in line, line


def test_a_producer_granted_credit_is_named_after_the_stop_it_filled(
        broker: Broker, qname: Callable[[str], str], shared_sidecar: SidecarProcess) -> None:
    """Grants count as what a producer put in (`FilledBy.granted`, wired to the grant
    desk): a producer that asked credit and sent it is named, with no report of its own."""
    q = known(shared_sidecar, broker.declare(qname("granted"), {
        "qpid.flow_stop_count": 50, "qpid.flow_resume_count": 20}))
    r = shared_sidecar.http.post(f"{shared_sidecar.url}/grants/%2F/{quote(q, safe='')}",
                                 json={"messages": 40, "bytes": 40_000}, timeout=10,
                                 headers={"X-Producer-Id": "credited-3"})
    assert r.status_code == 200 and r.json()["messages"] == 40, r.text
    broker.publish(q, 60)  # what it was granted, and more: over the stop
    eventually(lambda: flow(shared_sidecar, q)["flowStopped"])
    top = eventually(lambda: shared_sidecar.get(
        f"/queues/%2F/{quote(q, safe='')}").json()["topProducers"])
    assert [(p["producer"], p["messages"]) for p in top] == [("credited-3", 40)], top
