"""Celery: every task an app sends honours flow control before it is published.

    from flow_sidecar_client.celery import install
    install(app)                     # mode="wait", or mode="raise"

One call, through Celery's public seam: a `before_task_publish` receiver, which Celery runs
in the sending thread with the message's final exchange and routing key, after its router
(`queue=`, `task_routes`, the default queue) and for every way of sending (`delay`,
`apply_async`, `send_task`, chains, groups, chords, retries). The destination is the queue
when the exchange is the default one, else the exchange and routing key, asked of the
sidecar as `GET /flow/exchange/{vhost}/{exchange}?routing_key=K`; the vhost is the app's
broker URL's. `mode="wait"` blocks the sending thread while the destination is flow
stopped, with Qpid's log lines and `FlowControlTimeout` after `timeout` s (default
`flow_control_wait_failure`); `mode="raise"` raises `FlowStopped` naming the queues.
Celery publishes the task when the receiver returns; an exception leaves it unsent. While
the sidecar is away a task waits (or raises) where the publishers would hold a message:
what the sidecar last said holds for `unreachable_grace` s, then it fails open, loudly
(`on_unreachable` as the publishers'; docs/producers.md#when-the-sidecar-is-away).

A worker never waits on a queue it consumes itself: a task that sends there (a chain's next
step, a retry, a sub-task) publishes at once, because the thread that would wait may be
the one that drains it (a solo pool, or every slot of a prefork pool waiting) and the wait
would end only in `FlowControlTimeout`. What a worker sends to other queues waits like any
sender; the worker's consumer keeps running in its own thread or process. See
docs/producers.md#celery.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Literal

from celery import Celery, signals  # type: ignore[import-untyped]  # Celery has no types
from celery import current_app as _current_app
from kombu.abstract import MaybeChannelBound
from kombu.entity import Exchange, Queue
from kombu.serialization import dumps

from flow_sidecar_client.confirms import PublishError
from flow_sidecar_client.flow_gate import Destination, FlowGate, Gates
from flow_sidecar_client.flow_wait import WaitSettings
from flow_sidecar_client.outage import DEFAULT_GRACE, OnUnreachable, check_on_unreachable
from flow_sidecar_client.sidecar_url import sidecar_url as resolve_url

log = logging.getLogger("flow_sidecar.client")

Mode = Literal["wait", "raise"]
#: A wait without end (ms): about 30 years.
NEVER = 10**12


class FlowControl:
    """What `install` made for one app: its settings and its gates. `uninstall()` removes
    it (and gives back its credit)."""

    def __init__(self, app: Celery, url: str, mode: Mode, settings: WaitSettings,
                 capacity: int, on_unreachable: OnUnreachable = None,
                 unreachable_grace: float = DEFAULT_GRACE,
                 producer_class: str | None = None) -> None:
        self.app = app
        self.mode = mode
        self.settings = settings
        self._vhost: str | None = None
        self._unrefusable: set[Destination] = set()  # warned about once
        self.gates = Gates(lambda d: FlowGate(d, url, capacity, on_unreachable=on_unreachable,
                                              unreachable_grace=unreachable_grace,
                                              producer_class=producer_class))

    @property
    def vhost(self) -> str:
        """The app's broker URL's vhost, read at the first send (apps are configured after
        they are made)."""
        if self._vhost is None:
            self._vhost = str(self.app.connection_for_write().virtual_host or "/")
        return self._vhost

    def claims(self, declare: Iterable[Any], properties: dict[str, Any]) -> bool:
        """Whether this app sends the message: a queue it declares is one of the app's
        own (Celery declares the routed queue), or the reply-to is the app's."""
        own = self.app.amqp.queues
        if any(isinstance(q, Queue) and own.get(q.name) is q for q in declare):
            return True
        return bool(properties.get("reply_to")) and properties["reply_to"] == self.app.thread_oid

    def consumed(self) -> frozenset[str]:
        """The queues of the worker running the current task (none outside a task)."""
        if self.app.current_worker_task is None:
            return frozenset()
        return frozenset(self.app.amqp.queues.consume_from)

    def before_publish(self, body: Any, exchange: Any, routing_key: str,
                       declare: list[Any] | None) -> None:
        """Admit one message to its destination, as `mode` says (see the module doc)."""
        name = exchange.name if isinstance(exchange, Exchange) else str(exchange or "")
        gate = self.gates.get(Destination.of_publish(self.vhost, name, routing_key or ""))
        size, own = _size(body, self.app.conf.task_serializer), self.consumed()
        if declare is None:  # nowhere to put a refusal: hold the task until it may go
            if gate.stopped and gate.destination not in self._unrefusable:
                self._unrefusable.add(gate.destination)
                log.warning("a task for %s cannot be refused (Celery declares nothing for "
                            "a route without a queue): it waits however long the stop "
                            "lasts; name a queue in the route to have it raise",
                            gate.destination)
            gate.admit(size, replace(self.settings, failure_ms=NEVER), own=own)
            return
        try:
            gate.admit(size, self.settings, wait=self.mode == "wait", own=own)
        except PublishError as refusal:
            declare.insert(0, Refusal(error=refusal))

    def uninstall(self) -> None:
        with _lock:
            if _installed.get(id(self.app)) is self:
                del _installed[id(self.app)]
        self.gates.close()


def _size(body: Any, serializer: str) -> int:
    """The message body's size as the app serializes it (compression only shrinks it)."""
    payload = dumps(body, serializer=serializer)[2]  # type: ignore[no-untyped-call]
    return len(payload.encode() if isinstance(payload, str) else payload)


_installed: dict[int, FlowControl] = {}
_lock = threading.Lock()


def install(app: Celery, *, sidecar_url: str | None = None, mode: Mode = "wait",
            timeout: float | None = None, capacity: int = 50,
            on_unreachable: OnUnreachable = None,
            unreachable_grace: float = DEFAULT_GRACE,
            producer_class: str | None = None) -> FlowControl:
    """Make every task `app` sends honour flow control before it is published.

    `sidecar_url`: else FLOW_SIDECAR_URL, else http://127.0.0.1:8080. `mode`: "wait"
    blocks the sending thread while the destination is stopped, "raise" raises
    FlowStopped. `timeout`: seconds a wait lasts before FlowControlTimeout (default
    FLOW_CONTROL_WAIT_FAILURE, else Qpid's 120 s). `capacity`: the grant size asked for,
    the window declared to the sidecar and the one spent while it is away.
    `on_unreachable` and `unreachable_grace` (s) as the publishers': by default what the
    sidecar last said holds while it is away, until it fails open after the grace period.
    `producer_class`: the app's class among the queues' producerClasses (sent as
    X-Producer-Class; docs/graded-flow.md#producer-classes). Installing again replaces the app's settings."""
    if mode not in ("wait", "raise"):
        raise ValueError(f"mode must be 'wait' or 'raise', not {mode!r}")
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be at least 0 s, not {timeout}")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, not {capacity}")
    check_on_unreachable(on_unreachable, unreachable_grace)
    settings = WaitSettings.resolve(None, None if timeout is None else round(timeout * 1000),
                                    os.environ)
    control = FlowControl(app, resolve_url(sidecar_url), mode, settings, capacity,
                          on_unreachable, unreachable_grace, producer_class)
    with _lock:
        previous = _installed.get(id(app))
        _installed[id(app)] = control
    if previous is not None:
        previous.gates.close()
    signals.before_task_publish.connect(_before_task_publish, weak=False,
                                        dispatch_uid="flow_sidecar_client.celery")
    return control


def _owner(declare: Iterable[Any], properties: dict[str, Any]) -> FlowControl | None:
    """The installed app that sends this message: one that claims it, else the current
    app if it is installed (two apps in one process each keep their own settings)."""
    with _lock:
        controls = list(_installed.values())
    for control in controls:
        if control.claims(declare, properties):
            return control
    current = _current_app._get_current_object()
    return next((c for c in controls if c.app is current), None)


class Refusal(MaybeChannelBound):
    """A task that must not be published, as an entity to declare: Celery logs and drops
    what a signal receiver raises, but the receiver may add entities to `declare`, which
    kombu declares before it publishes; declaring this one raises the refusal, in the
    sending thread, out of `apply_async` (nothing is published)."""

    attrs = (("error", None),)  # kombu copies an entity from its attrs when it binds it
    can_cache_declaration = False
    error: PublishError

    def declare(self, *_: Any, **__: Any) -> None:
        raise self.error


def _before_task_publish(sender: str | None = None, body: Any = None, exchange: Any = "",
                         routing_key: str = "", declare: list[Any] | None = None,
                         properties: dict[str, Any] | None = None, **_: Any) -> None:
    """Celery's `before_task_publish`: runs in the sending thread before the publish."""
    control = _owner(declare or (), properties or {})
    if control is None:
        return
    control.before_publish(body, exchange, routing_key,
                           declare if isinstance(declare, list) else None)
