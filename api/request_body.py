"""JSON request bodies read whatever the Content-Type says.

Operators type `curl -X PUT ... -d '{...}'`, which sends form encoding; refusing that with
a confusing 422 helps nobody. Bodies are parsed as JSON and validated by the pydantic model,
and errors keep FastAPI's 422 shape (`detail[].loc` names the field).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


async def json_body(request: Request, model: type[Model]) -> Model:
    """Validate the raw body as JSON against `model`; 422 on anything else."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        raise RequestValidationError(
            [_in_body(e) for e in exc.errors(include_url=False)]) from None


def _in_body(error: Any) -> dict[str, Any]:
    """A validation error located in the body, echoing its input only when that is plain
    JSON: NaN, 1e400 (infinity) or undecodable bytes would break the 422 itself."""
    out = {k: v for k, v in error.items() if k != "input"}
    out["loc"] = ("body", *error["loc"])
    try:
        json.dumps(error.get("input"), allow_nan=False)
    except (TypeError, ValueError):
        return out
    out["input"] = error.get("input")
    return out


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` that documents `model` as the JSON request body. Nested models are
    written in place: a `$defs` reference would not resolve inside the OpenAPI document."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": _inline(schema, defs)}}}}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node
