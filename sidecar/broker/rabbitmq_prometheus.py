"""Where a RabbitMQ's queue depths and alarms come from: `--depth-source`.

What each source costs the broker, measured at 10,000 classic queues on RabbitMQ 3.10
(broker CPU per request): the management API's `columns=` listing 2.0-2.3 s, Prometheus
`/metrics/detailed?family=queue_coarse_metrics&family=queue_metrics` 0.9 s,
`family=queue_coarse_metrics` alone (messages, ready, unacknowledged: no bytes) 0.1 s. So:

- `prometheus`: every poll reads `queue_coarse_metrics` from every node
  (`rabbitmq_prometheus`, `--prometheus-url`): each queue's messages and unacknowledged
  messages. The bytes (`queue_metrics`, 17 more samples a queue) come with it only every
  so often: a read that took t seconds is repeated no sooner than t / BYTES_SHARE - t
  after it (every poll for a few hundred queues, about every 15 s at 10,000), so that it
  keeps the broker busy at most BYTES_SHARE of the time. The listing (arguments, type,
  policy, rates) is read from the management API in one unpaged request likewise (at most
  LISTING_SHARE of the time, at least every LISTING_TTL s), and a queue the figures name
  that the listing lacks, or lists that the figures no longer name, is asked about on its
  own (up to SINGLE_READS a poll; more wait for the next listing), a new one every poll
  for FRESH_FOR s (its effective policy comes a moment after it).
- `management`: one management API listing every poll, with its statistics; where it
  carries no figures at all for STATISTICS_OFF_AFTER s (the management agent collects
  none), the queue totals the broker still gives (`RabbitMQAdapter.fetch_totals`: counts,
  no bytes, so the size dimension is unwatched and says why).
- `auto` (default): `prometheus` where the endpoint answers with the queue families,
  else `management`; when the endpoint fails, the poll falls back to `management` at once
  (one WARNING) and the endpoint is tried again every PROBE_AGAIN s. A failure while the
  management API fails too (the broker is down, or restarting) does not count: the next
  poll asks the endpoint first again. An endpoint that names no queue while the listing
  has some is taken to lack the queue families only after STATISTICS_OFF_AFTER s of such
  answers: a broker just started names a queue only once its statistics timer fires.

How late the figures are: rabbitmq_prometheus reads the `queue_coarse_metrics` and
`queue_metrics` tables at the moment of the request; each queue process writes its row
when its statistics timer fires (every `collect_statistics_interval`, 5 s by default) and
when it goes idle (`rabbit_amqqueue_process:emit_stats`), and deletes it with the queue.
The management API serves the same rows after its agent's collector has aggregated them
(every sampling interval, 5 s by default), so a Prometheus figure is never older than the
management API's would be: the poll dates both alike (the moment its first request was
sent less `--broker-stats-lag`, or the lag measured), and a figure without bytes resumes
no queue whose size is watched (`live_depth.resume_depth`).

A queue the Prometheus answer leaves out (its node is down, or it was just deleted) gets
no depth: it is never given one by guess. The answers are parsed as they arrive, and only
the lines that changed (`prometheus_text.FigureLines`): a 10,000-queue answer of 16 MB is
never held whole; a queue whose figures, listing and consumers are those of the poll
before keeps its `QueueInfo` (`merged_queues`), which the engine only dates again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import requests

from sidecar.broker import BrokerError
from sidecar.broker.merged_queues import MergedQueues
from sidecar.broker.prometheus_text import (
    QUEUE_FAMILIES,
    FigureLines,
    QueueFigures,
    node_alarms,
    whole_lines,
)
from sidecar.broker.rabbitmq import RabbitMQAdapter
from sidecar.config import is_loopback
from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueInfo, QueueKey
from sidecar.redaction import redact_url
from sidecar.signals.exchange_routing import Topology

DepthSource = Literal["auto", "management", "prometheus"]
Active = Literal["management", "prometheus", "queue-totals"]
COUNT_FAMILIES = ("queue_coarse_metrics",)  # messages and unacknowledged, no bytes
BYTES_SHARE = 0.05  # of the time the broker may spend on the byte figures
LISTING_SHARE = 0.03  # of the time it may spend listing queues in prometheus mode
LISTING_TTL = 30.0  # seconds between queue listings in prometheus mode, at least
SINGLE_READS = 20  # queues asked about on their own in a poll, at most
FRESH_FOR = 10.0  # seconds a new queue is asked about on its own, every poll
PROBE_AGAIN = 60.0  # seconds before auto tries a failed Prometheus endpoint again
STATISTICS_OFF_AFTER = 6.0  # seconds without any queue's figures before the totals are read
CHUNK = 65536
# what a node on this machine is asked to send: not compressed. The plugin gzips its answer
# when asked (requests asks by default), and at 10,000 queues that cost the broker more
# CPU than the bytes saved are worth on loopback (docs/benchmarks.md, "Ten thousand
# queues"). A node elsewhere is still asked for gzip.
PLAIN = {"Accept-Encoding": "identity"}
UNREAD = "not read yet"

log = logging.getLogger("flow_sidecar.broker")


class Streak:
    """How long something has held, poll after poll: from the first poll that saw it
    until `end`."""

    def __init__(self) -> None:
        self.since: float | None = None

    def seconds(self, now: float) -> float:
        """Seconds it has held by `now` (0 on the first poll that sees it)."""
        if self.since is None:
            self.since = now
        return now - self.since

    def end(self) -> None:
        self.since = None


def next_after(took: float, share: float) -> float:
    """Seconds to wait after a read that took `took` so that such reads keep the broker
    busy at most `share` of the time."""
    return took / share - took


class PrometheusEndpoints:
    """GETs on the Prometheus endpoint of each node, parsed as the body arrives."""

    def __init__(self, urls: Sequence[str], *, timeout: float,
                 session: requests.Session | None = None) -> None:
        self.urls = [url.rstrip("/") for url in urls]
        # decided once per node, not on every request of every poll
        self._headers = {url: PLAIN if is_loopback(urlsplit(url).hostname or "") else None
                         for url in self.urls}
        self.timeout = timeout
        self.session = session or requests.Session()
        # each endpoint's last answer of each set of families, to parse only what changed
        self._lines: dict[tuple[str, tuple[str, ...]], FigureLines] = {}

    def _blocks(self, url: str, path: str, params: list[tuple[str, str]]) -> Iterator[str]:
        try:
            # the plugin builds the whole answer before its first byte: allow it the time
            # a whole management answer has (sidecar.broker.failover), four timeouts
            with self.session.get(url + path, params=params, stream=True,
                                  headers=self._headers[url],
                                  timeout=(min(self.timeout, 3.0), 4 * self.timeout)
                                  ) as response:
                if response.status_code != 200:
                    raise BrokerError(f"GET {redact_url(url)}{path}: HTTP "
                                      f"{response.status_code}")
                yield from whole_lines(response.iter_content(chunk_size=CHUNK))
        except requests.RequestException as exc:
            raise BrokerError(f"GET {redact_url(url)}{path}: {type(exc).__name__}") from exc

    def queue_figures(self, families: Sequence[str] = QUEUE_FAMILIES,
                      nodes: set[str] | None = None) -> dict[QueueKey, QueueFigures]:
        """Every node's queues (each node serves the queues whose process it runs); the
        nodes that answered are added to `nodes`."""
        figures: dict[QueueKey, QueueFigures] = {}
        for url in self.urls:
            lines = self._lines.setdefault((url, tuple(families)), FigureLines())
            figures.update(lines.read(self._blocks(
                url, "/metrics/detailed", [("family", f) for f in families]), nodes))
        return figures

    def alarms(self) -> dict[str, NodeStatus]:
        """Each node's alarm flags, by the node name its answer gives."""
        statuses = {}
        for url in self.urls:
            found = node_alarms(line for block in self._blocks(url, "/metrics", [])
                                for line in block.split("\n"))
            if found is None:
                raise BrokerError(f"GET {redact_url(url)}/metrics: no rabbitmq_identity_info "
                                  "(is this rabbitmq_prometheus?)")
            statuses[found[0]] = found[1]
        return statuses

    def close(self) -> None:
        self.session.close()


class RabbitMQDepthSources:
    """A `BrokerAdapter` for RabbitMQ that takes depth and alarms from the source
    `--depth-source` names, at the cadences the module describes."""

    def __init__(self, management: RabbitMQAdapter, prometheus: PrometheusEndpoints,
                 mode: DepthSource, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.management = management
        self.prometheus = prometheus
        self.mode: DepthSource = mode
        self.clock = clock
        self.active: Active = "prometheus" if mode == "prometheus" else "management"
        self.reason = UNREAD
        self.alarms_from: Literal["management", "prometheus"] = (
            "prometheus" if mode == "prometheus" else "management")
        self.prometheus_error: str | None = None
        self.figures = management.figures  # the depth figures it refused (ChecksFigures)
        self._listing: dict[QueueKey, QueueInfo] | None = None
        self._listing_due = -math.inf  # when the listing is read again
        self._soonest_listing = -math.inf  # when its share of the broker's time allows one
        self._bytes_due = -math.inf  # when the byte figures are read again
        self._probe_due = -math.inf  # when auto tries the Prometheus endpoint again
        self.bytes_every: float | None = None  # seconds, as last worked out
        self.listing_every: float | None = None
        self._blank = Streak()  # no queue of the management listing has figures
        # the endpoint names no queue while the listing has some: a broker just started
        # names none until each queue's statistics timer first fires (up to
        # `collect_statistics_interval`), so it is taken to lack the queue families only
        # after STATISTICS_OFF_AFTER s of such answers
        self._no_queue = Streak()
        self._cluster: set[str] | None = None  # the running nodes, as of the last listing
        self._fresh: dict[QueueKey, float] = {}  # queues read on their own, since when
        # the queues built from the last poll with bytes, and without
        self._merged = {True: MergedQueues(), False: MergedQueues()}
        self._with_bytes = False  # this poll's figures have bytes

    def fetch_queues(self) -> list[QueueInfo]:
        if self.mode == "prometheus" or (self.mode == "auto"
                                         and self.clock() >= self._probe_due):
            try:
                figures = self._prometheus_figures()
            except BrokerError:
                if self.mode == "prometheus":
                    raise
                self._listing_due = -math.inf  # read whole again when Prometheus is back
                # raises while the whole broker is down (a restart): then the endpoint is
                # not the one to blame, and the next poll asks it first again
                queues = self._from_management()
                self._probe_due = self.clock() + PROBE_AGAIN
                return queues
            return self._from_prometheus(figures)
        return self._from_management()

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
        return {"mode": self.mode, "active": self.active, "reason": self.reason,
                "alarmsFrom": self.alarms_from,
                "prometheusUrls": [redact_url(u) for u in self.prometheus.urls],
                "prometheusError": self.prometheus_error,
                "bytesEverySeconds": _rounded(self.bytes_every),
                "listingEverySeconds": _rounded(self.listing_every),
                "listingPaged": self.management.paged is not None}

    def close(self) -> None:
        self.management.close()
        self.prometheus.close()

    # -- management ----------------------------------------------------------------
    def _from_management(self) -> list[QueueInfo]:
        """The management listing; its queue totals while it carries no figures at all."""
        queues = self.management.fetch_queues()
        if not queues or any(q.messages is not None for q in queues):
            self._blank.end()
            self._switch("management", "the management API's statistics" + (
                "" if self.mode == "management" else
                f" (the Prometheus endpoint: {self.prometheus_error or 'not tried yet'})"))
            return queues
        if self._blank.seconds(self.clock()) < STATISTICS_OFF_AFTER:
            return queues  # new queues have no figures for their first seconds
        self._switch("queue-totals", "the management API serves no queue statistics: "
                     "message counts only, sizes unwatched")
        return self.management.fetch_totals()

    # -- prometheus ----------------------------------------------------------------
    def _prometheus_figures(self) -> dict[QueueKey, QueueFigures]:
        """This poll's figures: counts, and bytes when due (see the module)."""
        now = self.clock()
        with_bytes = self._with_bytes = now >= self._bytes_due
        started = time.monotonic()
        figures = self._figures(QUEUE_FAMILIES if with_bytes else COUNT_FAMILIES)
        if with_bytes:
            took = time.monotonic() - started
            self.bytes_every = max(took, next_after(took, BYTES_SHARE))
            self._bytes_due = now + self.bytes_every
        return figures

    def _from_prometheus(self, figures: dict[QueueKey, QueueFigures]) -> list[QueueInfo]:
        """The listing with the figures as depth, and each queue's consumers."""
        read_alone: set[QueueKey] = set()
        listing = self._listed(figures, self.clock(), read_alone)
        self._switch("prometheus", "rabbitmq_prometheus: counts every poll, bytes every "
                     f"{self.bytes_every or 0:.1f} s")
        return self._merged[self._with_bytes].merge(
            listing.values(), figures, read_alone, self.management.read_consumers())

    def _listed(self, figures: dict[QueueKey, QueueFigures], now: float,
                read_alone: set[QueueKey]) -> dict[QueueKey, QueueInfo]:
        """The listing, read again when due; queues new to it or gone from the figures
        asked about on their own while they are few, and a new queue (new to the figures
        or to a listing) asked again for its first FRESH_FOR seconds, in turns within
        SINGLE_READS a poll: the broker gives its effective policy only once the queue's
        statistics are first collected, and until then the policy is worked out from
        policy lists up to POLICY_TTL old. The queues read on their own go into
        `read_alone`."""
        listing = self._listing
        if listing is None or now >= self._listing_due:
            started = time.monotonic()
            before, listing = listing, {(q.vhost, q.name): q
                                        for q in self.management.list_queues()}
            took = time.monotonic() - started
            self._cluster = None  # asked again with the next figures
            self.listing_every = max(LISTING_TTL, next_after(took, LISTING_SHARE))
            self._soonest_listing = now + next_after(took, LISTING_SHARE)
            self._listing_due, self._listing = now + self.listing_every, listing
            if before is not None:  # a queue first seen in this listing is new too
                for key in listing.keys() - before.keys():
                    self._fresh.setdefault(key, now)
            return listing
        for key, since in list(self._fresh.items()):
            if now - since > FRESH_FOR or key not in listing:
                del self._fresh[key]
        new: list[QueueKey] = []
        gone: list[QueueKey] = []
        if figures.keys() != listing.keys():  # a pass in C (the same queues, most polls)
            new = [key for key in figures if key not in listing]
            gone = [key for key in listing if key not in figures]
        if len(new) + len(gone) > SINGLE_READS:
            self._listing_due = now  # too many: the next poll lists them all
        fresh = [key for key in self._fresh if key in figures]  # least lately read first
        for key in (new + gone + fresh)[:SINGLE_READS]:
            info = self.management.fetch_queue(*key)
            if info is None:
                listing.pop(key, None)
                if key in figures:  # figures of a name the broker does not know: one its
                    # labels mangle (3.x: `"`, `\`), or a queue deleted since; the listing
                    # finds the first as soon as its share allows
                    self._listing_due = min(self._listing_due, self._soonest_listing)
                continue
            listing[key] = info
            read_alone.add(key)
            self._fresh[key] = self._fresh.pop(key, now)  # to the back of the round
        return listing

    def _figures(self, families: Sequence[str]) -> dict[QueueKey, QueueFigures]:
        """The figures of every node; BrokerError unless the endpoints answer for every
        running node of the cluster (a single --prometheus-url, or the default one on a
        host that runs another broker, would leave queues without depth for good)."""
        nodes: set[str] = set()
        try:
            figures = self.prometheus.queue_figures(families, nodes)
            if self._cluster is None:
                self._cluster = {name for name, status in self.management.fetch_alarms()
                                 .items() if status.running is not False}
            if not self._cluster <= nodes:
                missing = ", ".join(sorted(self._cluster - nodes))
                raise BrokerError(f"the Prometheus endpoints answer for "
                                  f"{', '.join(sorted(nodes)) or 'no RabbitMQ node'}, "
                                  f"not for {missing}")
            if (not figures and self._listing
                    and self._no_queue.seconds(self.clock()) >= STATISTICS_OFF_AFTER):
                # an endpoint without the queue families (another exporter, an old plugin)
                raise BrokerError("the Prometheus endpoint lists no queue (family "
                                  "queue_coarse_metrics) while the broker has some")
        except BrokerError as exc:
            if self.prometheus_error is None:  # one line per outage
                log.warning("queue depth from the Prometheus endpoint failed: %s", exc)
            self.prometheus_error = str(exc)
            raise
        if figures:
            self._no_queue.end()
        elif self._listing is None or self._listing:
            return figures  # no queue named yet: none gets a depth, nothing is read again
        if self.prometheus_error is not None:
            log.info("queue depth from the Prometheus endpoint read again")
        self.prometheus_error = None
        return figures

    def _switch(self, source: Active, reason: str) -> None:
        """Log the first choice (INFO) and every change of source after it (WARNING)."""
        if source != self.active or self.reason == UNREAD:
            log.log(logging.INFO if self.reason == UNREAD else logging.WARNING,
                    "queue depth now from the %s (--depth-source %s): %s",
                    {"prometheus": "Prometheus endpoint", "management": "management API",
                     "queue-totals": "management API's queue totals"}[source],
                    self.mode, reason)
        self.active, self.reason = source, reason


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 2)
