"""JSON request bodies, validated by a pydantic model.

`api.guards` has already made sure a body is JSON by its Content-Type and at most
`--max-body-bytes` long, and read it whole. Errors keep FastAPI's 422 shape
(`detail[].loc` names the field); `api.error_answers` caps how many are echoed. A body
of thousands of unknown keys is refused from a plain `json.loads` (a millisecond for the
largest body) instead of letting pydantic build an error per key on the event loop.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import AliasChoices, BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)
MANY_KEYS = 64  # more keys than any request model has, with all its aliases


async def json_body(request: Request, model: type[Model]) -> Model:
    """Validate the raw body as JSON against `model`; 422 on anything else."""
    raw = await request.body()
    unknown = _unknown_keys(raw, model)
    if unknown:
        raise RequestValidationError([
            {"type": "extra_forbidden", "loc": ("body", key), "msg": "Extra inputs are not "
             "permitted", "input": value} for key, value in unknown])
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        raise RequestValidationError(
            [_in_body(e) for e in exc.errors(include_url=False)]) from None


def accepted_keys(model: type[BaseModel]) -> frozenset[str]:
    """Every key `model` reads: field names, aliases and alias choices."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        keys.add(field.alias or name)
        choices = field.validation_alias
        if isinstance(choices, str):
            keys.add(choices)
        elif isinstance(choices, AliasChoices):
            keys.update(c for c in choices.choices if isinstance(c, str))
    return frozenset(keys)


def _unknown_keys(raw: bytes, model: type[BaseModel]) -> list[tuple[str, Any]]:
    """The unknown keys of a body object with more keys than `model` could take (which
    forbids extra keys); [] for anything else, which pydantic then judges."""
    if raw.count(b":") <= MANY_KEYS or model.model_config.get("extra") != "forbid":
        return []
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict) or len(data) <= MANY_KEYS:
        return []
    accepted = accepted_keys(model)
    return [(k, v) for k, v in data.items() if k not in accepted]


def _in_body(error: Any) -> dict[str, Any]:
    """A validation error located in the body. Its input is echoed (or left out when it has
    no JSON: NaN, 1e400, undecodable bytes) by `error_answers.capped_errors`."""
    return {**error, "loc": ("body", *error["loc"])}


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
