"""FastAPI's error answers, made safe and exact.

- 422: FastAPI echoes every validation error with its whole input. A body of 900,000
  unknown keys made a 90 MB answer, built on the event loop. Here an answer carries the
  first `MAX_ERRORS` errors, inputs cut to `MAX_INPUT` characters, and says how many more
  there were.
- 405: Starlette's `Allow` names the methods of the first route whose path matched; a path
  served by several routes (GET and PUT /defaults are two) needs all of them listed, as
  the OpenAPI document has them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

MAX_ERRORS = 5
MAX_INPUT = 100


_UNFIT = object()


def _short(value: Any) -> Any:
    """`value` if its JSON is short, else the start of that JSON marked as cut (`_UNFIT`
    when it has no JSON: NaN, bytes that are not text)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _UNFIT
    if len(text) <= MAX_INPUT:
        return value
    return text[:MAX_INPUT] + "... (cut)"


def capped_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """The first few errors, inputs shortened, plus one saying how many were left out."""
    out = []
    for error in errors[:MAX_ERRORS]:
        item = {k: v for k, v in dict(error).items() if k not in ("input", "url")}
        if "input" in error and (short := _short(error["input"])) is not _UNFIT:
            item["input"] = short
        out.append(item)
    if len(errors) > MAX_ERRORS:
        out.append({"loc": [], "msg": f"{len(errors) - MAX_ERRORS:,} more errors not shown",
                    "type": "too_many_errors"})
    encoded: list[dict[str, Any]] = jsonable_encoder(out)
    return encoded


async def validation_failed(_: Request, exc: Exception) -> Response:
    """422 with capped errors (replaces FastAPI's handler)."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": capped_errors(exc.errors())}, status_code=422)


def allowed_methods(request: Request) -> str | None:
    """Every method the OpenAPI document lists for this request's path, for `Allow`; None
    for paths it does not describe (the dashboard's)."""
    app = request.app
    table: list[tuple[re.Pattern[str], set[str]]] | None = getattr(app.state, "allow", None)
    if table is None:
        table = app.state.allow = [
            (re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "$"),
             {method.upper() for method in operations})
            for path, operations in app.openapi()["paths"].items()]
    methods = set().union(*(m for pattern, m in table if pattern.match(request.scope["path"])))
    return ", ".join(sorted(methods)) or None


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI's answer to an HTTPException, with a complete `Allow` on 405."""
    assert isinstance(exc, HTTPException)
    allow = allowed_methods(request) if exc.status_code == 405 else None
    if allow is not None:
        exc.headers = {**(exc.headers or {}), "Allow": allow}
    return await http_exception_handler(request, exc)


def install_error_answers(app: FastAPI) -> None:
    """Put these handlers in place of FastAPI's."""
    app.add_exception_handler(RequestValidationError, validation_failed)
    app.add_exception_handler(HTTPException, http_error)
