"""Qpid C++ broker adapter: queues, their flow state and topology from qpidd over QMF.

qpidd enforces producer flow control itself (the seeds describe this broker), so each
queue comes with the broker's own `flowStopped` and `flowStoppedCount` (`BrokerFlow`) and
the sidecar reports them instead of running its machine; the thresholds shown are the
ones qpidd applies, resolved from the queue's declare arguments by `qpidd_rules` with the
sidecar's --default-flow-* options (which must therefore match qpidd's).

Depth is QMF's `msgDepth` and `byteDepth`: every message on the queue, acquired ones
included, and bytes as qpidd counts them for flow control (the whole encoded message,
headers too). QMF computes them when asked, so there is no statistics lag.

Thresholds can only be written where qpidd allows it: at declare time. `declare_queue`
creates a queue with `qpid.flow_*` arguments through the broker's `create` method; qpidd
validates them and its refusal is passed on word for word. An existing queue's thresholds
cannot be changed (no QMF method does it); docs/qpid.md ("Qpid C++ (qpidd)") says what to do.
qpidd has a single virtual host, reported as `/`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sidecar.broker import BrokerError, BrokerRefused, QueueExists, json_int
from sidecar.broker.figures import FigureCheck
from sidecar.broker.qmf import QmfConsole, QmfError, QmfRefused, object_name
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.flow.qpidd_rules import qpidd_resolution
from sidecar.flow.queue_limits import qpid_limits
from sidecar.flow.thresholds import DefaultPolicy
from sidecar.model import BrokerFlow, QueueInfo
from sidecar.signals.exchange_routing import Binding, Topology

VHOST = "/"
REFUSAL_PREFIX = "invalid-argument: "
SOURCE_LOCATION = re.compile(r" \([^()]*\.(?:cpp|h):\d+\)$")
EXISTS_PREFIX = "object already exists"
FIGURES = ("msgDepth", "byteDepth")


def queue_from_qmf(values: Mapping[str, Any], policy: DefaultPolicy,
                   check: FigureCheck) -> QueueInfo:
    """Map one QMF queue object's `_values` to a QueueInfo with the broker's flow state.
    A depth figure that is missing is no sample (never "empty"); `check` vets them."""
    arguments = values.get("arguments")
    arguments = dict(arguments) if isinstance(arguments, Mapping) else {}
    limits = qpid_limits(arguments)
    name = str(values["name"])
    messages, nbytes = check.figures(VHOST, name, values, FIGURES)
    return QueueInfo(
        vhost=VHOST,
        name=name,
        messages=messages,
        bytes=nbytes,
        arguments=arguments,
        limits=limits,
        broker_flow=BrokerFlow(
            stopped=bool(values.get("flowStopped")),
            stopped_count=json_int(values.get("flowStoppedCount")),
            resolution=qpidd_resolution(arguments, limits, policy),
        ),
    )


def topology_from_qmf(exchanges: list[dict[str, Any]],
                      bindings: list[dict[str, Any]]) -> Topology:
    """Exchanges and queue bindings as QMF lists them (qpidd binds only queues)."""
    return Topology.build(
        {(VHOST, str(e.get("name", ""))): str(e.get("type", "")) for e in exchanges},
        (Binding(VHOST, object_name(b.get("exchangeRef")), object_name(b.get("queueRef")),
                 "queue", str(b.get("bindingKey", "")))
         for b in bindings if b.get("exchangeRef") is not None),
    )


def refusal_text(text: str) -> str:
    """qpidd's refusal without its error-code and queue prefixes and the source location it
    appends (`invalid-argument: Queue "q": qpid.flow_resume_count=10 must be ...
    (.../QueueFlowLimit.cpp:51)` -> `qpid.flow_resume_count=10 must be ...`), which is how
    the sidecar's own refusals read."""
    text = SOURCE_LOCATION.sub("", text).removeprefix(REFUSAL_PREFIX)
    if text.startswith('Queue "') and '": ' in text:
        text = text.split('": ', 1)[1]
    return text


class QpidCppAdapter:
    """Reads one qpidd through QMF (AMQP 1.0) and declares queues with thresholds."""

    def __init__(self, url: str, *, user: str | None = None, password: str | None = None,
                 timeout: float = 5.0, defaults: DefaultPolicy | None = None,
                 console: QmfConsole | None = None) -> None:
        self._console = console or QmfConsole(url, user=user, password=password,
                                              timeout=timeout)
        self._defaults = defaults or DefaultPolicy()
        self.figures = FigureCheck()

    def _query(self, class_name: str) -> list[dict[str, Any]]:
        try:
            return self._console.query(class_name)
        except QmfError as exc:
            raise BrokerError(str(exc)) from None

    def fetch_queues(self) -> list[QueueInfo]:
        """Every queue with depth, arguments and the broker's flow state (but the
        console's own reply queue)."""
        queues = self._query("queue")
        own = self._console.reply_queue
        return [queue_from_qmf(values, self._defaults, self.figures) for values in queues
                if self.figures.named(values, ("name",)) is not None
                and values["name"] != own]

    def fetch_topology(self) -> Topology:
        """Exchanges and bindings, for flow through an exchange."""
        return topology_from_qmf(self._query("exchange"), self._query("binding"))

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        """None: qpidd has no memory or disk alarms that block every publisher (its own
        flow control is per queue)."""
        return {}

    def fetch_vhosts(self) -> set[str]:
        """qpidd's one virtual host."""
        return {VHOST}

    def declare_queue(self, vhost: str, name: str, values: Mapping[str, int]) -> None:
        """Create queue `name` with these `qpid.flow_*` arguments (qpidd's only way to set
        thresholds). BrokerRefused with qpidd's text when it refuses them or the queue
        exists already (qpidd then keeps the queue's own thresholds)."""
        if vhost != VHOST:
            raise BrokerRefused(f"qpidd has one virtual host, {VHOST!r}; not {vhost!r}")
        try:
            self._console.call("create", {"type": "queue", "name": name, "strict": True,
                                          "properties": dict(values)})
        except QmfRefused as exc:
            if exc.text.startswith(EXISTS_PREFIX):
                raise QueueExists(refusal_text(exc.text)) from None
            raise BrokerRefused(refusal_text(exc.text)) from None
        except QmfError as exc:
            raise BrokerError(str(exc)) from None

    def close(self) -> None:
        self._console.close()
