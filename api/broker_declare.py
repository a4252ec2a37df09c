"""Thresholds written to a broker that fixes them at declare time (Qpid C++).

qpidd reads `qpid.flow_*` only when a queue is declared and offers no way to change them
afterwards, and it enforces them itself: settings stored in the sidecar would change
nothing. So on such a broker `PUT /queues/{vhost}/{queue}/flow` declares the queue with
those arguments (qpidd validates them and its refusal is a 422 in its own words), and a
queue that exists already is a 409 that says what to do instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from fastapi import HTTPException

from sidecar.broker import BrokerError, BrokerRefused, QueueDeclarer, QueueExists
from sidecar.flow.thresholds import FLOW_KEYS
from sidecar.model import QueueKey
from sidecar.runtime import Runtime

FIXED = ("the broker fixes flow thresholds when a queue is declared and {queue!r} exists: "
         "delete it and declare it again with the new qpid.flow_* arguments (qpid-config "
         "del queue {queue}; qpid-config add queue {queue} --flow-stop-count N ...), or "
         "PUT these settings before the queue exists and the sidecar declares it")


class DeclareRefused(Exception):
    """The broker refused the thresholds: `key` names the setting, `message` is its text."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


async def declare_with_thresholds(runtime: Runtime, declarer: QueueDeclarer, key: QueueKey,
                                  values: Mapping[str, float]) -> None:
    """Declare the queue on the broker with `values`, then poll so that it shows.

    409 HTTPException when the queue exists, DeclareRefused when the broker refuses the
    values, 503 when the broker cannot be asked."""
    vhost, queue = key
    if runtime.engine.entry(key) is not None:
        raise HTTPException(409, FIXED.format(queue=queue))
    try:
        await asyncio.to_thread(declarer.declare_queue, vhost, queue,
                                {k: int(v) for k, v in values.items() if k in FLOW_KEYS})
    except QueueExists:  # declared since the last poll
        raise HTTPException(409, FIXED.format(queue=queue)) from None
    except BrokerRefused as exc:
        text = str(exc)
        setting = text.split("=", 1)[0] if text.startswith("qpid.") else "body"
        raise DeclareRefused(setting, text) from None
    except BrokerError as exc:
        raise HTTPException(503, f"the broker could not be asked to declare {queue!r}: "
                                 f"{exc}; nothing was changed, retry",
                            headers={"Retry-After": "1"}) from None
    await runtime.poller.poll_once()
