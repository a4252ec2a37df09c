"""URLs and error texts fit for logs, answers and metrics: credentials and query values hidden.

Webhook URLs often carry their receiver's key in the query (`https://hooks.example/x?
apikey=...`), and a management URL may carry `user:password@`. `redact_url` keeps what an
operator needs to tell endpoints apart (scheme, host, port, path, query keys) and hides the
rest; `scrub` removes those same secrets from a text that may quote the URL, such as the
message of a failed HTTP request.
"""

from __future__ import annotations

from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

HIDDEN = "***"
_SHORTEST_SECRET = 4  # shorter query values are not secrets, and hiding them would garble text


def redact_url(url: str) -> str:
    """`url` with userinfo, query values and fragment replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a URL that does not parse)"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{HIDDEN}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{key}={HIDDEN}" if sep else HIDDEN
        for key, sep, _ in (piece.partition("=") for piece in parts.query.split("&") if piece))
    return urlunsplit((parts.scheme, netloc, parts.path, query,
                       HIDDEN if parts.fragment else ""))


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that must not be shown, as they may appear in texts: userinfo,
    the query and each of its values (raw, decoded and re-encoded), the fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    found: set[str] = set()
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        found.update((userinfo, userinfo.partition(":")[2]))
    found.update((parts.query, parts.fragment))
    for piece in parts.query.split("&"):
        value = piece.partition("=")[2] if "=" in piece else piece
        plain = unquote(value.replace("+", " "))
        found.update((value, plain, quote(plain, safe=""), quote_plus(plain)))
    return sorted((s for s in found if len(s) >= _SHORTEST_SECRET), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with every secret part of `url` replaced by `***`."""
    for secret in url_secrets(url):
        text = text.replace(secret, HIDDEN)
    return text
