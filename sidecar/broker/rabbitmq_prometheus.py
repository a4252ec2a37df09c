"""Where a RabbitMQ's queue depths and alarms come from: `--depth-source`.

- `management`: the management API's statistics, as always (`RabbitMQAdapter`).
- `prometheus`: depth and alarms from the Prometheus endpoint of every node
  (`rabbitmq_prometheus`, `--prometheus-url`), every poll; the queue list with arguments,
  type and policy from the management API at a slower cadence (every LISTING_TTL seconds,
  sooner when the Prometheus answer names queues the list does not have, or misses some it
  has). For brokers whose management statistics are off, or too costly to collect.
- `auto` (default): the management API every poll; when its listing has carried no depth
  for any queue for STATISTICS_OFF_AFTER seconds (4.x with `management_metrics_collection`
  denied; a broker whose only queues are new has none for their first 4.5-6 s) the
  figures come from the Prometheus endpoint instead, and when no node reports its alarm
  flags, so do the alarms.

Every request of a `fetch_queues` call is sent after the call starts, as with the
management API alone: a time the poller takes just before the call bounds the Prometheus
figures' requests exactly as it bounds the management API's.

A queue the Prometheus answer leaves out (its node is down, or it was just created) gets
no depth: it is never given one by guess. A Prometheus endpoint that cannot be read fails
the poll in `prometheus` mode; in `auto` mode the queues stay without depth, which /healthz
reports (`sidecar.flow.data_gaps`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Literal

import requests

from sidecar.broker import BrokerError
from sidecar.broker.prometheus_text import QUEUE_FAMILIES, QueueFigures, node_alarms, queue_figures
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueInfo, QueueKey
from sidecar.redaction import redact_url
from sidecar.signals.exchange_routing import Topology

DepthSource = Literal["auto", "management", "prometheus"]
LISTING_TTL = 30.0  # seconds between queue listings in prometheus mode
LISTING_SOONEST = 2.0  # seconds: the least time between two listings the figures asked for
STATISTICS_OFF_AFTER = 6.0  # seconds without any queue's figures before auto switches
CHUNK = 65536

log = logging.getLogger("flow_sidecar.broker")


def with_figures(queues: Sequence[QueueInfo],
                 figures: dict[QueueKey, QueueFigures]) -> list[QueueInfo]:
    """The listed queues with the Prometheus figures as their depth; a queue without
    figures has no depth (None), whatever the listing said."""
    out = []
    for info in queues:
        got = figures.get((info.vhost, info.name), QueueFigures())
        out.append(replace(info, messages=got.messages, bytes=got.bytes, unacked=got.unacked))
    return out


class PrometheusEndpoints:
    """GETs on the Prometheus endpoint of each node, read line by line (a 10,000-queue
    answer is 16 MB: it is never held whole)."""

    def __init__(self, urls: Sequence[str], *, timeout: float,
                 session: requests.Session | None = None) -> None:
        self.urls = [url.rstrip("/") for url in urls]
        self.timeout = timeout
        self.session = session or requests.Session()

    def _lines(self, url: str, path: str, params: list[tuple[str, str]]) -> Iterator[str]:
        try:
            with self.session.get(url + path, params=params, timeout=self.timeout,
                                  stream=True) as response:
                if response.status_code != 200:
                    raise BrokerError(f"GET {redact_url(url)}{path}: HTTP "
                                      f"{response.status_code}")
                for raw in response.iter_lines(chunk_size=CHUNK):
                    yield raw.decode("utf-8", errors="replace")
        except requests.RequestException as exc:
            raise BrokerError(f"GET {redact_url(url)}{path}: {type(exc).__name__}") from exc

    def queue_figures(self) -> dict[QueueKey, QueueFigures]:
        """Every node's queues (each node serves the queues whose process it runs)."""
        figures: dict[QueueKey, QueueFigures] = {}
        for url in self.urls:
            figures.update(queue_figures(self._lines(
                url, "/metrics/detailed", [("family", f) for f in QUEUE_FAMILIES])))
        return figures

    def alarms(self) -> dict[str, NodeStatus]:
        """Each node's alarm flags, by the node name its answer gives."""
        statuses = {}
        for url in self.urls:
            found = node_alarms(self._lines(url, "/metrics", []))
            if found is None:
                raise BrokerError(f"GET {redact_url(url)}/metrics: no rabbitmq_identity_info "
                                  "(is this rabbitmq_prometheus?)")
            statuses[found[0]] = found[1]
        return statuses

    def close(self) -> None:
        self.session.close()


class RabbitMQDepthSources:
    """A `BrokerAdapter` for RabbitMQ that takes depth and alarms from the source
    `--depth-source` names (see the module)."""

    def __init__(self, management: RabbitMQAdapter, prometheus: PrometheusEndpoints,
                 mode: DepthSource, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.management = management
        self.prometheus = prometheus
        self.mode: DepthSource = mode
        self.clock = clock
        self.active: Literal["management", "prometheus"] = (
            "prometheus" if mode == "prometheus" else "management")
        self.alarms_from: Literal["management", "prometheus"] = self.active
        self.prometheus_error: str | None = None
        self.figures = management.figures  # the depth figures it refused (ChecksFigures)
        self._listing: tuple[float, list[QueueInfo]] | None = None
        self._blank_since: float | None = None  # since when no listed queue has figures

    def fetch_queues(self) -> list[QueueInfo]:
        if self.mode == "prometheus":
            return self._from_prometheus()
        queues = self.management.fetch_queues()
        if not queues or any(q.messages is not None for q in queues):
            self._blank_since = None
        elif self._blank_since is None:
            self._blank_since = self.clock()
        statistics_off = self._blank_since is not None and (
            self.active == "prometheus" or self.clock() - self._blank_since >= STATISTICS_OFF_AFTER)
        if self.mode == "management" or not statistics_off:
            self._switch("management")
            return queues
        try:
            figures = self._figures()
        except BrokerError:
            return queues  # no depth: /healthz and the log say so (data_gaps)
        self._switch("prometheus")
        return with_figures(queues, figures)

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        if self.mode == "prometheus":
            self.alarms_from = "prometheus"
            return self.prometheus.alarms()
        statuses = self.management.fetch_alarms()
        blank = bool(statuses) and all(s.memory is None and s.disk is None
                                       for s in statuses.values())
        if self.mode == "management" or not blank:
            self.alarms_from = "management"
            return statuses
        try:
            found = self.prometheus.alarms()
        except BrokerError as exc:
            self.prometheus_error = str(exc)
            return statuses  # no flags: /healthz and the log say so (data_gaps)
        self.alarms_from = "prometheus"
        return found

    def fetch_topology(self) -> Topology:
        return self.management.fetch_topology()

    def fetch_vhosts(self) -> set[str]:
        return self.management.fetch_vhosts()

    def status(self) -> dict[str, Any]:
        """What /healthz shows of the depth source."""
        return {"mode": self.mode, "active": self.active, "alarmsFrom": self.alarms_from,
                "prometheusUrls": [redact_url(u) for u in self.prometheus.urls],
                "prometheusError": self.prometheus_error}

    def close(self) -> None:
        self.management.close()
        self.prometheus.close()

    def _figures(self) -> dict[QueueKey, QueueFigures]:
        try:
            figures = self.prometheus.queue_figures()
        except BrokerError as exc:
            if self.prometheus_error is None:  # one line per outage
                log.warning("queue depth from the Prometheus endpoint failed: %s", exc)
            self.prometheus_error = str(exc)
            raise
        if self.prometheus_error is not None:
            log.info("queue depth from the Prometheus endpoint read again")
        self.prometheus_error = None
        return figures

    def _from_prometheus(self) -> list[QueueInfo]:
        figures = self._figures()
        now = self.clock()
        listing = self._listing
        if listing is None or now - listing[0] > LISTING_TTL or (
                now - listing[0] > LISTING_SOONEST
                and {(q.vhost, q.name) for q in listing[1]} != figures.keys()):
            listing = self._listing = (now, self.management.fetch_queues())
        return with_figures(listing[1], figures)

    def _switch(self, source: Literal["management", "prometheus"]) -> None:
        if source != self.active:
            log.warning("queue depth now from the %s (--depth-source auto)%s",
                        "Prometheus endpoint" if source == "prometheus" else "management API",
                        ": the management API serves no queue statistics"
                        if source == "prometheus" else "")
        self.active = source
