"""Names with any characters work against the real broker, in any vhost. (Bad input and
answer shapes need no broker: tests/api/test_input.py and test_answers.py.)"""

from __future__ import annotations

import glob
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known
from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess

Names = Callable[[str], str]


@pytest.mark.parametrize("base", ["a/b", "with space", "100%", "заказы", "注文 🚀", "q?x#y"])
def test_any_queue_name_round_trips(broker: Broker, shared_sidecar: SidecarProcess,
                                    qname: Names, base: str) -> None:
    q = known(shared_sidecar, broker.declare(qname(base)))
    answer = flow(shared_sidecar, q)
    assert answer["queue"] == q and answer["vhost"] == "/"
    # the default-vhost form: /flow/{queue}
    r = shared_sidecar.get("/flow/" + quote(q, safe=""))
    assert r.status_code == 200 and r.json()["queue"] == q
    r = shared_sidecar.put(queue_path(q) + "/flow", json={"qpid.flow_stop_count": 3})
    assert r.status_code == 200 and r.json()["queue"] == q
    listed = shared_sidecar.get("/queues", params={"name": glob.escape(q)}).json()
    assert [v["queue"] for v in listed] == [q]


def test_queue_in_another_vhost(broker: Broker, shared_sidecar: SidecarProcess,
                                qname: Names) -> None:
    vhost = qname("vh/ü")
    path = f"/api/vhosts/{quote(vhost, safe='')}"
    assert broker.api("PUT", path).status_code in (201, 204)
    try:
        assert broker.api("PUT", f"/api/permissions/{quote(vhost, safe='')}/guest",
                          json={"configure": ".*", "write": ".*", "read": ".*"}).ok
        assert broker.api("PUT", f"/api/queues/{quote(vhost, safe='')}/orders",
                          json={"durable": False, "arguments": {"qpid.flow_stop_count": 5}}
                          ).status_code in (201, 204)
        known(shared_sidecar, "orders", vhost)
        answer = flow(shared_sidecar, "orders", vhost)
        assert answer["vhost"] == vhost and answer["sources"]["count"] == "arguments"
        assert shared_sidecar.get(flow_path("orders", "/")).status_code in (404, 200)
    finally:
        broker.api("DELETE", path)
