"""No configured secret ever shows: a real sidecar with all of them set (token, management
password and URL credentials, webhook secrets, a key in a webhook URL's query, credentials
tried in a webhook URL), made to log at DEBUG through failing deliveries, refused
subscriptions and failing broker reads; its log file and every GET answer are scanned."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from tests.integration.conftest import Broker
from tests.utils.flow import known, wait_depth
from tests.utils.sidecar_process import SidecarProcess, eventually, free_port


def unique(what: str) -> str:
    return f"{what}-{secrets.token_hex(8)}"


def every_get(sidecar: SidecarProcess, fill: dict[str, str],
              headers: dict[str, str]) -> list[tuple[str, str]]:
    """(path, answer text) of every GET route the document lists (but the endless
    /events stream), path parameters filled in, plus the pages outside the document; paths
    asked with the token are marked `(token)`."""
    answers = []
    paths = [p for p, ops in sidecar.get("/openapi.json").json()["paths"].items() if "get" in ops]
    for path in [*paths, "/", "/ui", "/docs", "/openapi.json"]:
        if path == "/events":
            continue
        for name, value in fill.items():
            path = path.replace("{" + name + "}", value)
        mark = " (token)" if headers else ""
        answers.append((path + mark, sidecar.get(path, headers=headers).text))
    return answers


def test_no_secret_reaches_a_log_line_or_an_answer(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess],
        qname: Callable[[str], str]) -> None:
    token, webhook_secret, query_key = unique("tok"), unique("whsec"), unique("apikey")
    url_password, tried_password, wrong_password = (unique("urlpw"), unique("triedpw"),
                                                    unique("mgmtpw"))
    found_in: dict[str, list[str]] = {}
    common = ("--token", token, "--log-level", "DEBUG", "--poll-interval", "0.2",
              "--webhook-allow-private", "--webhook-backoff-base", "0.05",
              "--webhook-backoff-max", "0.2",
              "--management-url", f"http://flow:{url_password}@127.0.0.1:15672")
    auth = {"Authorization": f"Bearer {token}"}
    sidecar = sidecar_factory(*common).start()

    def post_webhook(body: dict[str, Any]) -> Any:
        return sidecar.http.post(sidecar.url + "/webhooks", json=body, headers=auth, timeout=10)

    q = qname("secret")
    dead = f"http://127.0.0.1:{free_port()}/hook?apikey={query_key}&team=ops"
    created = post_webhook({"url": dead, "secret": webhook_secret, "queue": q})
    assert created.status_code == 201, created.text
    refused = [post_webhook({"url": f"http://flow:{tried_password}@127.0.0.1:9/h",
                             "secret": webhook_secret}),
               post_webhook({"url": "http://169.254.169.254/?apikey=" + query_key,
                             "secret": webhook_secret}),
               post_webhook({"url": "ftp://x/", "secret": webhook_secret})]
    assert [r.status_code for r in refused] == [422, 422, 422]
    known(sidecar, broker.declare(q, {"qpid.flow_stop_count": 1}))
    broker.publish(q, 2)
    assert wait_depth(sidecar, q, 2)["flowStopped"] is True
    eventually(lambda: sidecar.log().count("delivery to http://127.0.0.1") >= 3)  # DEBUG too
    fill = {"vhost": "%2F", "queue": q, "exchange": "amq.direct",
            "sub_id": created.json()["id"], "asset": "dashboard.js"}
    answers = [("POST refused", r.text) for r in refused]
    answers += every_get(sidecar, fill, {}) + every_get(sidecar, fill, auth)

    sidecar.kill()  # the same data (and failing webhook) with a broker that refuses us
    sidecar.args = [*common, "--management-password", wrong_password, "--stale-after", "1"]
    sidecar.start(wait_ready=False)
    eventually(lambda: "broker poll failed" in sidecar.log())
    time.sleep(1)
    answers += every_get(sidecar, fill, {}) + every_get(sidecar, fill, auth)

    log = sidecar.log()
    assert "DEBUG" in log and "WARNING" in log and "apikey=***" in log
    for secret in (token, webhook_secret, query_key, url_password, tried_password,
                   wrong_password):
        places = [f"log line {n}" for n, line in enumerate(log.splitlines()) if secret in line]
        places += [f"GET {path}" for path, text in answers if secret in text
                   and not (secret == query_key and path.startswith("/webhooks/")
                            and path.endswith(" (token)") and "/deliveries" not in path)
                   and not (secret == query_key and path == "/webhooks (token)")]
        if places:
            found_in[secret] = places
    assert not found_in, found_in
    assert any("/deliveries" in path and '"lastError":"' in text
               for path, text in answers), "the scan saw failed deliveries' errors"
