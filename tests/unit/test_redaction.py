"""URLs and texts fit for logs and answers: no credentials, no query values."""

from __future__ import annotations

import pytest

from sidecar.redaction import redact_url, scrub


@pytest.mark.parametrize(("url", "shown"), [
    ("http://host/hook?apikey=s3cr3t-key", "http://host/hook?apikey=***"),
    ("https://u:pw@host:8443/p?a=1&b=&flag#frag", "https://***@host:8443/p?a=***&b=***&***#***"),
    ("https://hooks.example.com/services/T0/B0", "https://hooks.example.com/services/T0/B0"),
    ("http://127.0.0.1:15672", "http://127.0.0.1:15672"),
    ("http://[::1", "(a URL that does not parse)"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_removes_every_form_a_message_may_quote() -> None:
    url = "http://u:pa55word@host/hook?apikey=a%2Fb+c%20d&n=1"
    text = ("HTTPConnectionPool(host='host', port=80): Max retries exceeded with url: "
            "/hook?apikey=a%2Fb+c%20d&n=1; key a/b c d; quoted a%2Fb%20c%20d; pa55word")
    cleaned = scrub(text, url)
    for secret in ("a%2Fb+c%20d", "a/b c d", "a%2Fb%20c%20d", "pa55word"):
        assert secret not in cleaned
    assert "host='host', port=80" in cleaned and "n=1" not in cleaned
