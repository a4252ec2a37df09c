"""The operator dashboard: a static page under `/ui` and the depth history it draws.

The page (api/static/dashboard.*, no build step) polls one page of `GET /queues` and
the same page of `GET /queues/history` every second and redraws in place; filtering,
sorting and paging happen in the sidecar, so a refresh costs the same at 10,000 queues as
at 50. Files are served from an
allow-list, never from a path the client names.
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import FileResponse, RedirectResponse

from api import compression
from api.deps import SELECTION_REFUSED, RecentDep, SelectedDep
from api.schemas import HistoryAnswer
from sidecar.flow.slices import map_by_parts
from sidecar.model import QueueKey

STATIC = Path(__file__).resolve().parent.parent / "static"
ASSETS = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}

router = APIRouter(tags=["dashboard"])


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    """The sidecar's front page is the dashboard."""
    return RedirectResponse("/ui", status_code=307)


@router.get("/ui", include_in_schema=False)
async def page() -> FileResponse:
    """The dashboard page itself."""
    return FileResponse(STATIC / "dashboard.html", media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-cache"})


@router.get("/ui/{asset}", include_in_schema=False)
async def asset(asset: str) -> FileResponse:
    """The page's script and style sheet."""
    if asset not in ASSETS:
        raise HTTPException(404, f"no dashboard file {asset!r}")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset],
                        headers={"cache-control": "no-cache"})


@router.get("/queues/history", response_model=HistoryAnswer, responses=SELECTION_REFUSED)
async def history(request: Request, recent: RecentDep, selected: SelectedDep,
                  since: float | None = None) -> Response:
    """Recent depth samples per queue, from memory, for sparklines.

    The last `size` polls (120 by default) of every queue the broker reports, oldest
    first, each `[time, messages, bytes]` with time in Unix seconds; queues that disappear
    are dropped. The same parameters as `/queues` select the queues (`vhost`, `name`,
    `use_regex`, `sort`, `page`, `page_size`), so a page of the dashboard fetches the
    history of its own rows only. With `since`, only samples taken after that time: a
    client passes the newest time it holds and receives what is new. gzip when accepted.

        {"size": 120, "queues": [{"vhost": "/", "queue": "orders",
                                  "samples": [[1767225600.2, 120, 4096], ...]}]}
    """
    def series(key: QueueKey) -> bytes | None:
        if not recent.holds(key):
            return None  # settings waiting for a queue the broker does not report
        return json.dumps({"vhost": key[0], "queue": key[1],
                           "samples": recent.since(key, since)},
                          ensure_ascii=False, separators=(",", ":")).encode()

    bodies = await map_by_parts([row.key for row in selected.rows], series)
    body = b'{"size":%d,"queues":[%s]}' % (recent.size, b",".join(bodies))
    return await compression.answer(request, body, "application/json")
