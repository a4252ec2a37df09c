"""Queue and vhost names in URL paths, percent-encoded the way RabbitMQ's own API does.

Names may hold `/`, `%`, spaces and any Unicode, so each path segment is decoded on its
own from the raw request path (`/flow/%2F/a%2Fb` is vhost `/`, queue `a/b`). Starlette
decodes the whole path before routing, which would turn `%2F` into a separator; the
middleware in `api.edge.fast_path` hands routes the raw path instead and they decode here.

A name no broker object can have is refused here, so nothing is ever stored for it: more
than 255 bytes of UTF-8 (AMQP 0-9-1's short string, which RabbitMQ enforces on queue names
and which is all a producer can send for an exchange or to open a vhost), and CR or LF
in a queue or exchange name (RabbitMQ removes them from those names at declare, so
`a\nb` declares `ab`). NUL and other controls are accepted as the broker accepts them;
log lines escape them.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from fastapi import HTTPException

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


MAX_NAME_BYTES = 255
_BROKER_NAMES = ("queue", "vhost", "exchange")  # other segments (a producer id): any text


class BadPath(ValueError):
    """A path segment that is not valid percent-encoded UTF-8, or not a possible name."""


def decode_segment(raw: str, what: str) -> str:
    """Decode one raw segment (latin-1 str of the request's bytes) strictly; `what` says
    which name it is: `queue`, `vhost` and `exchange` follow the broker's rules for names,
    anything else (a producer id) only the encoding's."""
    if not raw:
        raise BadPath(f"{what} must not be empty")
    if _BAD_ESCAPE.search(raw):
        raise BadPath(f"{what} {raw!r} has a '%' not followed by two hex digits")
    try:
        data = unquote_to_bytes(raw.encode("latin-1"))
        name = data.decode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise BadPath(f"{what} {raw!r} is not percent-encoded UTF-8") from None
    if len(data) <= MAX_NAME_BYTES and "\n" not in name and "\r" not in name \
            or what not in _BROKER_NAMES:  # the common case first: this is the hot path
        return name
    if len(data) > MAX_NAME_BYTES:
        raise BadPath(f"{what} name is {len(data)} bytes of UTF-8: RabbitMQ's names are at "
                      f"most {MAX_NAME_BYTES}")
    if what != "vhost":
        raise BadPath(f"{what} name {name!r} contains CR or LF, which RabbitMQ removes from "
                      f"{what} names: no {what} can be named so")
    return name


def segment(raw: str, what: str) -> str:
    """decode_segment for routes: a bad segment is a 400 that names the part."""
    try:
        return decode_segment(raw, what)
    except BadPath as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
