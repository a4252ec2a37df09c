"""A JSON answer decoded a top-level array item at a time, so that other threads run between.

The broker reads run in worker threads while the event loop answers `/flow`. `json.loads`
is one call into C that holds the GIL until the whole document is decoded, and `/flow`
waits as long (docs/benchmarks.md#reads-and-memory-at-10000-queues). Decoding the items of a top-level array one by one gives the
interpreter a chance to switch threads between two items (every `sys.getswitchinterval()`)
for the same result. Anything else (an object, a scalar) is decoded in one call. Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_DECODER = json.JSONDecoder()


def loads_in_items(body: bytes | str) -> Any:
    """What `json.loads(body)` returns, or ValueError as it raises; a top-level array is
    decoded item by item (see the module)."""
    text = body.decode(json.detect_encoding(body), "surrogatepass") \
        if isinstance(body, bytes) else body
    at = _skip(text, 0)
    if not text.startswith("[", at):
        return json.loads(text)
    items: list[Any] = []
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return _ended(text, at + 1, items)
    while True:
        item, at = _DECODER.raw_decode(text, at)
        items.append(item)
        at = _skip(text, at)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
        elif text.startswith("]", at):
            return _ended(text, at + 1, items)
        else:
            raise ValueError(f"expected ',' or ']' at character {at}")


def _skip(text: str, at: int) -> int:
    """Where the whitespace from `at` ends."""
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # * matches nothing too


def _ended(text: str, at: int, items: list[Any]) -> list[Any]:
    """The items, when nothing but whitespace follows the array."""
    if _skip(text, at) != len(text):
        raise ValueError(f"extra data at character {at}")
    return items
