"""`GET /flow/...`: what a producer must do now for a queue (the hot path), and long-poll.

Plain GETs and long polls of known queues are answered by `api.edge.fast_path` before
routing; these routes serve the rest (unknown queues, not-yet-polled, producers under
`--producer-token`, bad input) and document the answer. Long-poll: `?since=VERSION&wait=SECONDS` returns at once when the queue's
`version` is no longer VERSION, else when it changes or the wait ends, whichever is
first (`wait` alone waits for the next change); waiting costs a coroutine, not a thread.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Response

from api.answers import Answers
from api.deps import AnswersDep, HubDep, QueueDep, VhostDep
from api.edge.direct_writes import stopping
from api.lookups import FlowQuery, FlowQueryDep, known_entry, note_producer, note_report
from api.producer_guard import PRODUCER_ANSWERS
from api.schemas import FlowAnswer, Problem
from sidecar.flow.queue_entry import QueueEntry
from sidecar.model import QueueKey
from sidecar.signals.change_fanout import ChangeHub

router = APIRouter(tags=["flow"])

_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"model": FlowAnswer,
          "description": "flowStopped, flowStoppedCount, depth, thresholds and their sources"},
    404: {"model": Problem, "description": "the broker does not report this queue"},
    503: {"model": Problem, "description": "the sidecar has not read the broker yet"},
    **PRODUCER_ANSWERS,
}


async def flow_answer(answers: Answers, hub: ChangeHub, vhost: str, queue: str,
                      query: FlowQuery) -> Response:
    """The queue's answer, after waiting for a change when asked to."""
    async def read() -> tuple[QueueEntry, int, list[QueueKey]]:
        entry = known_entry(answers.engine, vhost, queue)
        return entry, entry.version, [entry.key]

    asked_at = time.time()
    note_report(answers, known_entry(answers.engine, vhost, queue).key, query.producer_id,
                query.published, asked_at)
    with stopping(query.scope) as until:
        entry = await hub.long_poll(read, query.since, query.wait, until=until)
    note_producer(answers, entry, query, asked_at)
    return Response(answers.producer_body(entry, query.producer_id, time.time()),
                    media_type="application/json",
                    headers={"Cache-Control": "no-store"})


@router.get("/flow/{queue}", responses=_ANSWER, response_class=Response)
async def flow_in_default_vhost(queue: QueueDep, query: FlowQueryDep, answers: AnswersDep,
                                hub: HubDep) -> Response:
    """Flow state of a queue in the default vhost `/`."""
    return await flow_answer(answers, hub, "/", queue, query)


@router.get("/flow/{vhost}/{queue}", responses=_ANSWER, response_class=Response)
async def flow_in_vhost(vhost: VhostDep, queue: QueueDep, query: FlowQueryDep,
                        answers: AnswersDep, hub: HubDep) -> Response:
    """Flow state of a queue (vhost `/` is `%2F`)."""
    return await flow_answer(answers, hub, vhost, queue, query)
