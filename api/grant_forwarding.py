"""Forwarding credit grant requests to the replica that owns the vhost's credit.

With replicas (`--shared-state broker`) each vhost's credit is granted by one of them
(`sidecar.cluster.grant_owners`); a request that reaches another is sent on to the owner
over HTTP, as it came (body and `X-Producer-Id`), and the owner's answer is returned. A
forwarded request carries `X-Flow-Forwarded` and is answered where it lands, never sent on
again: replicas whose views of the members differ for a moment cannot bounce it, and a
replica that does not own the vhost answers it with nothing granted. An owner that cannot
be reached means nothing is granted (200, `limitedBy` says why): credit is never granted
on a guess.
"""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import Request, Response
from fastapi.responses import JSONResponse

from api.grant_schemas import MAX_GRANT_WAIT

FORWARDED = "x-flow-forwarded"
#: Seconds a forwarded request may take beyond the longest `wait` it may ask for.
MARGIN = 5.0


def forwarded(request: Request) -> bool:
    """Whether another replica sent this request on (answer it here, whatever happens)."""
    return FORWARDED in request.headers


async def forward(request: Request, owner: str, body: bytes,
                  unreachable: dict[str, Any] | None) -> Response:
    """`request` as the replica at `owner` answers it. When that replica does not answer:
    `unreachable` with status 200 (an answer granting nothing), or a 503 without it."""
    headers = {FORWARDED: "1", "content-type": "application/json"}
    for name in ("x-producer-id", "x-producer-class"):  # who asks, and its class
        if (value := request.headers.get(name)) is not None:
            headers[name] = value
    target = owner.rstrip("/") + request.url.path
    try:
        async with httpx.AsyncClient(timeout=MAX_GRANT_WAIT + MARGIN) as client:
            answer = await client.request(request.method, target, content=body,
                                          headers=headers, params=request.query_params)
    except httpx.HTTPError as exc:
        why = f"the replica that grants this credit ({owner}) did not answer: {exc!r}"
        if unreachable is None:
            return JSONResponse({"detail": why}, status_code=503)
        return JSONResponse({**unreachable, "limitedBy": why})
    return Response(content=answer.content, status_code=answer.status_code,
                    media_type="application/json")
