"""Who may speak for a producer: `--producer-token` and `--max-producers-per-client`.

Registering a producer (any flow request with `X-Producer-Id`), asking for or releasing
credit and `DELETE /producers/{id}` change what other producers are told (`overflowRisk`,
fair shares of credit), yet need no `--token`: producers are not operators. By default
anyone who reaches the sidecar may do them. An operator closes that with
`--producer-token` (those requests then need `Authorization: Bearer <producer token>`; the
admin `--token` works too) and with `--max-producers-per-client`, the most producer ids one
client address may speak for within `--producer-ttl` (anonymous askers are one id), so
that a thousand made-up ids cannot take every fair share. Whatever the options, a grant is
released only by the producer that asked for it (the grants routes check that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException, Request
from pydantic import SecretStr

from api.guards import bearer, token_matches
from api.schemas import Problem
from sidecar.signals.grant_desk import ANONYMOUS

# the answers a producer request may get from the guard, for the OpenAPI document
PRODUCER_ANSWERS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "--producer-token is set and the request does "
                                           "not carry it"},
    429: {"model": Problem, "description": "this client address speaks for "
                                           "--max-producers-per-client producers already"},
}


class ProducerGuard:
    """Checks one producer request against the options; see the module docstring."""

    def __init__(self, token: SecretStr | None, admin_token: SecretStr | None,
                 per_client: int | None, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tokens = [t for t in (token, admin_token) if t is not None] if token else []
        self.per_client = per_client
        self.ttl = ttl
        self.clock = clock
        self._seen: dict[str, dict[str, float]] = {}  # client -> producer -> last seen

    @property
    def active(self) -> bool:
        """Whether any check applies (else every producer request passes)."""
        return bool(self.tokens) or self.per_client is not None

    def problem(self, authorization: str | None, client: str, producer: str | None,
                *, counts: bool = True) -> tuple[int, str] | None:
        """(status, why) when the request may not speak for `producer`; else None, and
        the producer is noted for the client's cap (unless `counts` is false: a producer
        leaving takes no place)."""
        if self.tokens:
            given = bearer(authorization)
            if given is None or not any(token_matches(given, t) for t in self.tokens):
                return 401, ("this producer request needs 'Authorization: Bearer <token>' "
                             "with the sidecar's --producer-token")
        if self.per_client is None or not counts:
            return None
        now = self.clock()
        ids = {p: at for p, at in self._seen.get(client, {}).items() if now - at <= self.ttl}
        name = producer or ANONYMOUS
        if name not in ids and len(ids) >= self.per_client:
            self._seen[client] = ids
            return 429, (f"client {client} already speaks for {len(ids):,} producers within "
                         f"--producer-ttl; --max-producers-per-client is {self.per_client:,}")
        ids[name] = now
        self._seen[client] = ids
        return None

    def check(self, request: Request, producer: str | None, *, counts: bool = True) -> None:
        """`problem` for a route: an HTTPException when there is one."""
        client = request.client.host if request.client else "?"
        found = self.problem(request.headers.get("authorization"), client, producer,
                             counts=counts)
        if found is not None:
            headers = {"WWW-Authenticate": "Bearer"} if found[0] == 401 else None
            raise HTTPException(found[0], found[1], headers=headers)


def producer_guard(request: Request) -> ProducerGuard:
    """The app's guard (`api.app` builds it from the settings)."""
    guard: ProducerGuard = request.app.state.producer_guard
    return guard
