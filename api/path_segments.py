"""Queue and vhost names in URL paths, percent-encoded the way RabbitMQ's own API does.

Names may hold `/`, `%`, spaces and any Unicode, so each path segment is decoded on its
own from the raw request path (`/flow/%2F/a%2Fb` is vhost `/`, queue `a/b`). Starlette
decodes the whole path before routing, which would turn `%2F` into a separator; the
middleware in `api.flow_fast_path` hands routes the raw path instead and they decode here.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from fastapi import HTTPException

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class BadPath(ValueError):
    """A path segment that is not valid percent-encoded UTF-8."""


def decode_segment(raw: str, what: str) -> str:
    """Decode one raw segment (latin-1 str of the request's bytes) strictly."""
    if not raw:
        raise BadPath(f"{what} must not be empty")
    if _BAD_ESCAPE.search(raw):
        raise BadPath(f"{what} {raw!r} has a '%' not followed by two hex digits")
    try:
        return unquote_to_bytes(raw.encode("latin-1")).decode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise BadPath(f"{what} {raw!r} is not percent-encoded UTF-8") from None


def segment(raw: str, what: str) -> str:
    """decode_segment for routes: a bad segment is a 400 that names the part."""
    try:
        return decode_segment(raw, what)
    except BadPath as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
