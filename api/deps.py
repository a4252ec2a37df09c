"""Dependencies shared by the routes: parts of the runtime, decoded path names, the write token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry

from api.answers import Answers
from api.guards import bearer, token_matches
from api.name_filter_worker import FilterBusy, NameFilterWorker
from api.path_segments import segment
from api.queue_selection import MAX_PAGE_SIZE, BadSelection, Row, Selection, Sort
from api.schemas import Problem
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.config import Settings
from sidecar.flow.engine import FlowEngine
from sidecar.flow.live_sampler import LiveSampler
from sidecar.flow.poller import Poller
from sidecar.flow.slices import by_parts
from sidecar.name_patterns import PatternError
from sidecar.records.filled_by import FilledBy
from sidecar.records.recent_depths import RecentDepths
from sidecar.runtime import Runtime
from sidecar.settings_writes import Writes
from sidecar.signals.bindings_cache import TopologyCache
from sidecar.signals.change_fanout import ChangeHub
from sidecar.signals.grant_desk import GrantDesk
from sidecar.signals.producers import ProducerRegistry
from sidecar.signals.webhook_outbox import WebhookOutbox


def runtime_part(attribute: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that returns one part of the sidecar's runtime."""
    async def get(request: Request) -> Any:
        runtime: Runtime = request.app.state.runtime
        return getattr(runtime, attribute)

    get.__name__ = f"get_{attribute}"
    return get


async def get_owners(request: Request) -> GrantOwnership | None:
    """Who grants credit on which vhost, with replicas (`--shared-state broker`)."""
    runtime: Runtime = request.app.state.runtime
    return None if runtime.shared is None else runtime.shared.owners


async def get_answers(request: Request) -> Answers:
    """The answer builder (with its `/flow` body cache) of this app."""
    answers: Answers = request.app.state.answers
    return answers


async def vhost_name(
    vhost: Annotated[str, Path(
        description="vhost, percent-encoded (`%2F` for `/`); at most 255 bytes of UTF-8")],
) -> str:
    return segment(vhost, "vhost")


async def queue_name(
    queue: Annotated[str, Path(
        description="queue name, percent-encoded; at most 255 bytes of UTF-8, no CR or LF")],
) -> str:
    return segment(queue, "queue")


async def queue_selection(
    vhost: Annotated[str | None, Query(description="only this vhost")] = None,
    name: Annotated[str | None, Query(description=(
        "case-insensitive substring of the queue name, as RabbitMQ filters; a "
        "case-insensitive regular expression (RE2 syntax) searched in the name with "
        "`use_regex=true`; a glob on the whole name when it holds `*`, `?` or `[`; at most "
        "1,000 characters"))] = None,
    use_regex: Annotated[bool, Query(description=(
        "`name` is a regular expression (RE2: no backreferences or look-around)"))] = False,
    sort: Annotated[Sort, Query(description=(
        "order: `name` (vhost, then queue), `stopped` (flow stopped first), or the largest "
        "`messages`, `bytes`, `flowStoppedCount` first"))] = "name",
    sort_reverse: Annotated[bool, Query(description="the reverse order")] = False,
    page: Annotated[int | None, Query(ge=1, description=(
        "a page (from 1): the answer is then RabbitMQ's paged object"))] = None,
    page_size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description=(
        "queues per page, at most 500 as in RabbitMQ"))] = 100,
) -> Selection:
    """Which queues a listing shows and in which order, with RabbitMQ's parameter names."""
    return Selection(vhost, name, use_regex, sort, sort_reverse, page, page_size)


SELECTION_REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": (
        "`name` is not a regular expression the sidecar matches (RE2 syntax, "
        "`use_regex=true`), has over 1,000 characters or takes over 0.5 s to match, or "
        "`page` is after the last page: rules the schema cannot state")},
    503: {"model": Problem, "description": (
        "too many `name` patterns are waiting to be matched; retry after `Retry-After`")}}


@dataclass(frozen=True)
class Selected:
    """A listing's selection applied: the page's rows, and how many passed the filters
    out of how many."""

    selection: Selection
    rows: list[Row]
    filtered: int
    total: int


# rows selected between two turns of the event loop, so `/flow` waits for at most a slice
# (docs/benchmarks.md#slices-of-the-polls-work)
ROWS_SLICE = 250


async def selected_queues(request: Request,
                          selection: Annotated[Selection, Depends(queue_selection)]) -> Selected:
    """The queues a listing shows, selected a slice of queues at a time so `/flow` is
    answered in between, a pattern's names matched in a child process; 400 naming the
    parameter that selects nothing sensible (a pattern refused or over its budget, a page
    after the last), 503 while too many patterns wait their turn."""
    answers: Answers = request.app.state.answers
    try:
        entries = answers.engine.entries()
        waiting = answers.waiting_rows()
        passing: set[str] = set()
        if (pattern := selection.pattern) is not None:
            vhost = selection.vhost
            names = {e.key[1] for e in entries if vhost is None or e.key[0] == vhost}
            names.update(r.key[1] for r in waiting if vhost is None or r.key[0] == vhost)
            worker: NameFilterWorker = request.app.state.name_filters
            passing = await worker.passing(*pattern, list(names))
        runs = [selection.run(answers.rows_of(part), passing)
                async for part in by_parts(entries, ROWS_SLICE)]
        runs.append(selection.run(waiting, passing))
        rows, filtered = selection.page_of(runs)
    except (BadSelection, PatternError) as exc:
        raise HTTPException(400, exc.message) from None
    except FilterBusy as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
    return Selected(selection, rows, filtered, len(entries) + len(waiting))


_bearer = HTTPBearer(auto_error=False, description="the sidecar's --token, when it has one")
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def require_token(request: Request, credentials: BearerDep) -> None:
    """Writes (and delivery details) need `Authorization: Bearer <token>` when the sidecar
    has a token."""
    token = request.app.state.settings.token
    if token is None:
        return
    if credentials is None or not token_matches(credentials.credentials, token):
        raise HTTPException(
            status_code=401,
            detail="this request needs 'Authorization: Bearer <token>' with the sidecar's token",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def presents_token(request: Request) -> bool:
    """True when the sidecar has a token and the request carries it: such requests may see
    what is shown to nobody else (a webhook's full URL). Not a security dependency: the
    token is optional there, and the document must not say it is required."""
    token = request.app.state.settings.token
    given = bearer(request.headers.get("authorization"))
    return bool(token and given and token_matches(given, token))


EngineDep = Annotated[FlowEngine, Depends(runtime_part("engine"))]
SettingsDep = Annotated[Settings, Depends(runtime_part("settings"))]
PollerDep = Annotated[Poller, Depends(runtime_part("poller"))]
LiveDep = Annotated[LiveSampler | None, Depends(runtime_part("live"))]
ProducersDep = Annotated[ProducerRegistry, Depends(runtime_part("producers"))]
GrantsDep = Annotated[GrantDesk, Depends(runtime_part("grants"))]
HubDep = Annotated[ChangeHub, Depends(runtime_part("hub"))]
TopologyDep = Annotated[TopologyCache, Depends(runtime_part("topology"))]
WebhooksDep = Annotated[WebhookOutbox, Depends(runtime_part("outbox"))]
RecentDep = Annotated[RecentDepths, Depends(runtime_part("recent"))]
FilledDep = Annotated[FilledBy, Depends(runtime_part("filled"))]
MetricsDep = Annotated[CollectorRegistry, Depends(runtime_part("metrics"))]
WritesDep = Annotated[Writes, Depends(runtime_part("writes"))]
AnswersDep = Annotated[Answers, Depends(get_answers)]
OwnersDep = Annotated[GrantOwnership | None, Depends(get_owners)]
VhostDep = Annotated[str, Depends(vhost_name)]
QueueDep = Annotated[str, Depends(queue_name)]
SelectedDep = Annotated[Selected, Depends(selected_queues)]
WriteAccess = Depends(require_token)
TokenHolder = Annotated[bool, Depends(presents_token)]
