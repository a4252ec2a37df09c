"""The producer protocol of `GET /flow`: its limits, the answer's headers, and the one
parser of a request's path, query and producer headers that the fast path
(`api.edge.fast_path`) and the documented route (`api.routes.flow`) both judge by."""

from __future__ import annotations

import re

from starlette.types import Scope

from api.path_segments import BadPath, decode_segment
from sidecar.flow.producer_classes import NAME as CLASS_NAME

#: What a producer's headers say about it: (producer id or None, capacity, byte capacity or
#: None, producer class or None, its count of messages published so far or None). A plain
#: tuple: a NamedTuple costs twice the header parsing on the hot path.
Declared = tuple[str | None, int, int | None, str | None, int | None]
FLOW_HEADERS = ((b"content-type", b"application/json"), (b"cache-control", b"no-store"))
MAX_PRODUCER_ID = 200
CAPACITY_DIGITS, CAPACITY_BYTES_DIGITS = 9, 18  # X-Producer-Capacity(-Bytes)
PUBLISHED_DIGITS = 18  # X-Producer-Published
MAX_CAPACITY = 10**CAPACITY_DIGITS - 1
MAX_CAPACITY_BYTES = 10**CAPACITY_BYTES_DIGITS - 1
MAX_PUBLISHED = 10**PUBLISHED_DIGITS - 1
MAX_WAIT = 300.0  # seconds a long poll may wait
VERSION_DIGITS = 18
# X-Producer-Class: a class name as `producerClasses` has them (sidecar.flow.producer_classes)
PRODUCER_CLASS = f"^{CLASS_NAME}$"
_CLASS = re.compile(PRODUCER_CLASS.encode())


_ANONYMOUS: Declared = (None, 0, None, None, None)  # a request without producer headers
_PRODUCER_HEADERS = frozenset((b"x-producer-id", b"x-producer-capacity",
                               b"x-producer-capacity-bytes", b"x-producer-class",
                               b"x-producer-published"))


def flow_key(path: str) -> tuple[str, str] | None:
    """(vhost, queue) of `/flow/{queue}` or `/flow/{vhost}/{queue}`; None otherwise."""
    parts = path[len("/flow/"):].split("/")
    try:
        if len(parts) == 1:
            return "/", decode_segment(parts[0], "queue")
        if len(parts) == 2:
            return decode_segment(parts[0], "vhost"), decode_segment(parts[1], "queue")
    except BadPath:
        return None
    return None


def producer_headers(scope: Scope) -> Declared | None:
    """The producer's id (or None), capacity, byte capacity, class and published count;
    None when a header is malformed (FastAPI then answers with the 422 that names it, so
    both paths judge headers alike). Integers are ASCII digits only here: FastAPI would
    also take '+5' or ' 5', which producers do not send; those requests go on to it."""
    producer: bytes | None = None
    capacity = capacity_bytes = group = published = None
    for name, value in scope["headers"]:  # the first of repeated headers, as FastAPI does
        if name in _PRODUCER_HEADERS:
            if name == b"x-producer-id":
                producer = value if producer is None else producer
            elif name == b"x-producer-capacity":
                capacity = value if capacity is None else capacity
            elif name == b"x-producer-class":
                group = value if group is None else group
            elif name == b"x-producer-published":
                published = value if published is None else published
            elif capacity_bytes is None:
                capacity_bytes = value
    if producer is None and capacity is None and capacity_bytes is None and group is None \
            and published is None:
        return _ANONYMOUS
    if group is not None and not _CLASS.match(group):
        return None
    producer_class = None if group is None else group.decode("ascii")
    if capacity is not None and not (capacity.isdigit() and len(capacity) <= CAPACITY_DIGITS):
        return None
    if capacity_bytes is not None and not (
            capacity_bytes.isdigit() and len(capacity_bytes) <= CAPACITY_BYTES_DIGITS):
        return None
    if published is not None and not (
            published.isdigit() and len(published) <= PUBLISHED_DIGITS):
        return None
    if producer is None:
        return _ANONYMOUS if producer_class is None else (None, 0, None, producer_class, None)
    if not 0 < len(producer) <= MAX_PRODUCER_ID:
        return None
    return (producer.decode("latin-1"), 0 if capacity is None else int(capacity),
            None if capacity_bytes is None else int(capacity_bytes), producer_class,
            None if published is None else int(published))


def long_poll_query(query: bytes) -> tuple[int | None, float] | None:
    """(since, wait) of a query holding only `wait` (0 < wait <= 300 s) and optionally
    `since` (a version), each once and plainly written; None for anything else, which the
    route then judges (and refuses with the 422 that names the field)."""
    since: int | None = None
    wait: float | None = None
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"since" and since is None and value.isdigit() \
                and len(value) <= VERSION_DIGITS:
            since = int(value)
        elif name == b"wait" and wait is None and value.replace(b".", b"", 1).isdigit():
            wait = float(value)
        else:
            return None
    if wait is None or not 0 < wait <= MAX_WAIT:
        return None
    return since, wait


