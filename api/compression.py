"""gzip for the large answers a person or a scraper asks for: `/queues`, `/queues/history`
and `/metrics` (Prometheus asks for gzip on every scrape).

Per route rather than a middleware over the whole app: `/flow` answers are small and hot,
long-poll wake-ups would each compress the same bytes again, and a middleware would hold
back Server-Sent Events. zlib releases the GIL while it compresses, so compressing in a
worker thread leaves the event loop free for `/flow`.
"""

from __future__ import annotations

import asyncio
import zlib

from fastapi import Request, Response

MIN_SIZE = 1024  # below this gzip's header and the thread hop cost more than they save
LEVEL = 5  # RabbitMQ's JSON shrinks about tenfold at 5; higher levels cost more CPU for little
GZIP_WBITS = 31  # zlib's gzip container, with a zero mtime: the same body gives the same bytes


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an `Accept-Encoding` value accepts gzip: `gzip` or `*`, unless its weight is
    `q=0` (or unreadable, which is taken as a refusal)."""
    for coding in (accept_encoding or "").split(","):
        name, *params = (part.strip().lower() for part in coding.split(";"))
        if name in ("gzip", "*"):
            weights = [p.removeprefix("q=").strip() for p in params if p.startswith("q=")]
            try:
                return all(float(w) > 0 for w in weights)
            except ValueError:
                return False
    return False


async def answer(request: Request, body: bytes, media_type: str) -> Response:
    """`body` as the answer, gzipped (in a thread) when the client accepts it and it is
    large enough to gain."""
    headers = {"vary": "Accept-Encoding"}
    if len(body) >= MIN_SIZE and accepts_gzip(request.headers.get("accept-encoding")):
        body = await asyncio.to_thread(zlib.compress, body, LEVEL, GZIP_WBITS)
        headers["content-encoding"] = "gzip"
    return Response(body, media_type=media_type, headers=headers)
