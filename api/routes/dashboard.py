"""The operator dashboard: a static page under `/ui` and the depth history it draws.

The page (api/static/dashboard.*, no build step) polls `GET /queues` and
`GET /queues/history` every second and redraws in place. Files are served from an
allow-list, never from a path the client names.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

from api.deps import RecentDep
from api.schemas import HistoryAnswer

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


@router.get("/queues/history", response_model=HistoryAnswer)
async def history(recent: RecentDep, vhost: str | None = None, name: str | None = None,
                  since: float | None = None) -> dict[str, Any]:
    """Recent depth samples per queue, from memory, for sparklines.

    The last `size` polls (120 by default) of every queue the broker reports, oldest
    first, each `[time, messages, bytes]` with time in Unix seconds; queues that disappear
    are dropped. Filter by `vhost` and by a `name` glob as in `/queues`. With `since`, only
    samples taken after that time: a client passes the newest time it holds and receives
    what is new, so polling every second stays small with many queues.

        {"size": 120, "queues": [{"vhost": "/", "queue": "orders",
                                  "samples": [[1767225600.2, 120, 4096], ...]}]}
    """
    queues = [
        {"vhost": key[0], "queue": key[1], "samples": recent.since(key, since)}
        for key in recent.queues()
        if (vhost is None or key[0] == vhost) and (name is None or fnmatchcase(key[1], name))
    ]
    return {"size": recent.size, "queues": queues}
