"""What `/webhooks` lets through and shows: the target policy at subscription, URLs
redacted unless the token is presented, delivery details behind the token."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import InProcessAPI

pytestmark = pytest.mark.anyio
SECRET = "s3cret-signing-key-value"
KEYED_URL = "https://hooks.example.com/flow?apikey=k3y-in-the-query&team=ops"
TOKEN = {"Authorization": "Bearer t0ken"}


async def subscribe(api: InProcessAPI, url: str, headers: dict[str, str] | None = None
                    ) -> Any:
    return await api.client.post("/webhooks", json={"url": url, "secret": SECRET},
                                 headers=headers or {})


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/hook", "http://[::1]:9000/",
    "http://0.0.0.0:8080/", "http://2130706433/", "http://receiver.example:4369/",
    "http://localhost:9000/",
])
async def test_internal_targets_are_refused_naming_the_url(api: InProcessAPI, url: str) -> None:
    r = await subscribe(api, url)
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "url"] and "webhook" in error["msg"]
    assert api.sidecar.runtime.outbox.subscriptions() == []


async def test_private_targets_with_the_option_but_never_metadata(make_api: Any) -> None:
    api: InProcessAPI = await make_api(webhook_allow_private=True)
    for url in ("http://10.0.0.1/hook", "http://127.0.0.1:9000/", "http://localhost:9000/"):
        assert (await subscribe(api, url)).status_code == 201, url
    for url in ("http://169.254.169.254/", "http://0.0.0.0/", "http://127.0.0.1:4369/"):
        assert (await subscribe(api, url)).status_code == 422, url


async def test_urls_are_redacted_without_a_token(api: InProcessAPI) -> None:
    """No token configured: nobody proves who they are, so nobody sees the key."""
    created = await subscribe(api, KEYED_URL)
    assert created.status_code == 201
    sub_id = created.json()["id"]
    for answer in (created, await api.client.get("/webhooks"),
                   await api.client.get(f"/webhooks/{sub_id}")):
        assert "k3y-in-the-query" not in answer.text and SECRET not in answer.text
        assert "https://hooks.example.com/flow?apikey=***&team=***" in answer.text
    deliveries = await api.client.get(f"/webhooks/{sub_id}/deliveries")
    assert deliveries.status_code == 200


async def test_the_token_shows_the_full_url_and_guards_deliveries(make_api: Any) -> None:
    api: InProcessAPI = await make_api(token="t0ken")
    created = await subscribe(api, KEYED_URL, TOKEN)
    assert created.status_code == 201 and created.json()["url"] == KEYED_URL
    sub_id = created.json()["id"]
    anonymous = await api.client.get(f"/webhooks/{sub_id}")
    assert anonymous.status_code == 200 and "k3y-in-the-query" not in anonymous.text
    assert (await api.client.get(f"/webhooks/{sub_id}", headers=TOKEN)).json()["url"] == KEYED_URL
    listed = await api.client.get("/webhooks", headers=TOKEN)
    assert [w["url"] for w in listed.json()] == [KEYED_URL]
    refused = await api.client.get(f"/webhooks/{sub_id}/deliveries")
    assert refused.status_code == 401
    wrong = await api.client.get(f"/webhooks/{sub_id}/deliveries",
                                 headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert (await api.client.get(f"/webhooks/{sub_id}/deliveries",
                                 headers=TOKEN)).status_code == 200
