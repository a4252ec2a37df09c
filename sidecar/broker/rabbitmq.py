"""RabbitMQ adapter: queue depths, arguments and effective policies from the management API.

One keep-alive `requests.Session`, connect/read timeouts, and one unpaged `columns=`
listing of `/api/queues` so a poll of thousands of queues moves only the fields we use in
one request: at 10,000 queues that took 0.87 s where 20 pages of 500 took 3.8 s (each
page makes the broker sort and filter every queue again). The broker builds the whole
answer before it sends a byte, so its first byte may take four `--request-timeout`s.
Pages (`page_size=500`) only when the broker cannot answer in one request (it times out,
breaks off or gives a 5xx: `SlowAnswer`; a refused connection is an outage, not the
answer's size): for UNPAGED_AGAIN seconds, then one answer is tried again.

A broker whose management agent collects no statistics
(`management_agent.disable_metrics_collector`, or 4.x with `management_metrics_collection`
denied) still gives each queue's message counts from its queue processes' own figures with
`disable_stats=true&enable_queue_totals=true` (`fetch_totals`), but no byte count: such a
queue's size is not watched, and says why (`QueueInfo.bytes_unreported`).

Field notes (3.10 from Debian up to 4.x): `messages` and `message_bytes` are ready plus
unacknowledged, which is Qpid's depth; `message_bytes` counts bodies only, where Qpid
counts headers too. Both are refreshed by the broker every `collect_statistics_interval`
(5000 ms by default) and are absent on a queue that has not been sampled yet.
`messages_unacknowledged` is read too: a live sample (`rabbitmq_live`) counts only ready
messages and adds the unacknowledged ones from here; `/api/consumers` (read after the
queues, one request) gives each manual-ack consumer's prefetch window, which bounds how
many more can be unacknowledged by the time of a live sample.
`effective_policy_definition` holds the merged policy and operator policy. On 4.x the
same fields exist; quorum queues and streams may report `messages` without
`message_bytes`, which we read as unknown bytes (None), never as zero. Classic queue
mirroring fields are gone in 4.x and are not used. `/api/nodes` has `mem_alarm` and
`disk_free_alarm` per node from 3.x to 4.x; `/api/vhosts` has `messages` but no byte
total, so a vhost's size is summed from its queues.

4.x with the deprecated feature `management_metrics_collection` denied: `messages`,
`message_bytes`, `effective_policy_definition` and the nodes' alarm flags are all left out
(a new 4.x queue also lacks them for its first 4.5-6 s). The depth then comes from the
Prometheus endpoint (`rabbitmq_prometheus`), and the effective policy is worked out here
from the policy lists (`rabbitmq_policies`), read at most every POLICY_TTL seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import requests

from sidecar.broker import BrokerError, SlowAnswer, json_int
from sidecar.broker.failover import ManagementHttp
from sidecar.broker.figures import FigureCheck
from sidecar.broker.merged_queues import NO_CONSUMERS, merged
from sidecar.broker.rabbitmq_policies import effective_definition
from sidecar.flow.broker_alarms import NodeStatus, node_statuses
from sidecar.model import QueueInfo, QueueKey
from sidecar.records.log_lines import printable
from sidecar.signals.exchange_routing import Binding, Topology, alternate_of

COLUMNS = ",".join(
    (
        "name",
        "vhost",
        "type",
        "messages",
        "message_bytes",
        "messages_unacknowledged",
        "arguments",
        "effective_policy_definition",
        "policy",
        "message_stats.publish_details.rate",
        "message_stats.deliver_get_details.rate",
    )
)
PAGE_SIZE = 500  # only when the broker cannot list every queue in one answer
UNPAGED_AGAIN = 600.0  # seconds of pages before one answer is tried again
TOTALS = {"disable_stats": "true", "enable_queue_totals": "true"}
TOTALS_COLUMNS = "name,vhost,type,arguments,messages,messages_unacknowledged"
NO_BYTES = ("the broker reports message counts only (its management statistics are off: "
            "queue totals); no byte count")
MAX_PAGES = 2_000  # a million queues: far beyond what one management API lists
FIGURES = ("messages", "message_bytes", "messages_unacknowledged")
BINDING_KEYS = ("vhost", "destination", "destination_type")
POLICY_TTL = 10.0  # seconds a read of the (small) policy lists is used for queues without one
POLICY_SOONEST = 1.0  # seconds between reads asked for by a policy the lists lack
CONSUMER_COLUMNS = "queue.name,queue.vhost,ack_required,prefetch_count"

log = logging.getLogger("flow_sidecar.broker")


def consumer_windows(body: Any) -> dict[QueueKey, tuple[int, int | None]] | None:
    """Per queue of `/api/consumers`: how many consumers, and the sum of the prefetch
    windows of those that must acknowledge (None when one of them has no window, prefetch
    0: it may hold any number of messages unacknowledged). None for an answer of another
    shape. Consumers that acknowledge nothing hold nothing: their messages are gone."""
    if not isinstance(body, list):
        return None
    windows: dict[QueueKey, tuple[int, int | None]] = {}
    for item in body:
        queue = item.get("queue") if isinstance(item, dict) else None
        if not isinstance(queue, dict) or "name" not in queue or "vhost" not in queue:
            return None  # a consumer we cannot place: no bound for anyone
        key = (str(queue["vhost"]), str(queue["name"]))
        count, limit = windows.get(key, (0, 0))
        prefetch = json_int(item.get("prefetch_count"))
        if item.get("ack_required") is not False:
            limit = None if limit is None or not prefetch or prefetch < 0 else limit + prefetch
        windows[key] = (count + 1, limit)
    return windows


def _rate(stats: Any, key: str) -> float | None:
    try:
        rate = stats[key]["rate"]
    except (KeyError, TypeError):
        return None
    return float(rate) if isinstance(rate, (int, float)) else None


def queue_from_json(item: dict[str, Any], check: FigureCheck) -> QueueInfo:
    """Map one item of `/api/queues` to a QueueInfo; tolerant of missing or odd fields
    except the depth figures, which `check` vets."""
    arguments = item.get("arguments")
    policy = item.get("effective_policy_definition")
    stats = item.get("message_stats")
    vhost, name = str(item["vhost"]), str(item["name"])
    messages, nbytes, unacked = check.figures(vhost, name, item, FIGURES)
    return QueueInfo(
        vhost=vhost,
        name=name,
        messages=messages,
        bytes=nbytes,
        arguments=arguments if isinstance(arguments, dict) else {},
        # RabbitMQ serialises an empty policy definition as [] rather than {}.
        policy=policy if isinstance(policy, dict) else {},
        queue_type=str(item.get("type") or "classic"),
        publish_rate=_rate(stats, "publish_details"),
        deliver_rate=_rate(stats, "deliver_get_details"),
        unacked=unacked,
    )


def page_count(body: dict[str, Any]) -> int:
    """The pages of `/api/queues` an answer announces, at most MAX_PAGES; BrokerError for a
    count no broker gives (paging on would never end, or fail every poll in a traceback)."""
    pages = body.get("page_count", 1)  # 0 when there is no queue at all
    if json_int(pages) is None or not 0 <= pages <= MAX_PAGES:
        raise BrokerError(f"GET /api/queues: page_count={printable(repr(pages)[:40])} is no "
                          f"page count from 0 to {MAX_PAGES:,}")
    total = json_int(body.get("total_count"))
    if total is not None and pages > total // PAGE_SIZE + 1:
        raise BrokerError(f"GET /api/queues: page_count={pages:,} does not fit "
                          f"total_count={total:,} at {PAGE_SIZE} a page")
    return max(1, int(pages))


def paged(body: Any) -> dict[str, Any]:
    """A page of `/api/queues` as RabbitMQ gives it (an object with its `items`)."""
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        raise BrokerError("GET /api/queues: unexpected answer shape")
    return body


class RabbitMQAdapter:
    """Reads queues from a RabbitMQ cluster's management API, through any of its nodes
    (`url` may list several: see `sidecar.broker.failover`)."""

    def __init__(
        self,
        url: str | Sequence[str],
        user: str,
        password: str,
        *,
        timeout: float = 5.0,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = ManagementHttp([url] if isinstance(url, str) else url, user, password,
                                   timeout=timeout, session=session)
        self.figures = FigureCheck()
        self.clock = clock
        self._policy_lists: tuple[float, list[Any], list[Any]] | None = None
        self.paged: float | None = None  # when the broker could not list every queue in one

    def fetch_queues(self) -> list[QueueInfo]:
        """All queues of all vhosts with their statistics and consumers' windows."""
        return self.with_consumers(self.list_queues())

    def fetch_totals(self) -> list[QueueInfo]:
        """All queues with the message counts their processes report, for a broker that
        keeps no statistics: no bytes (see the module)."""
        return self.with_consumers([replace(q, bytes=None, bytes_unreported=NO_BYTES)
                                    for q in self.list_queues(TOTALS_COLUMNS, TOTALS)])

    def fetch_queue(self, vhost: str, name: str) -> QueueInfo | None:
        """One queue as the listing gives it (no consumers); None when it does not exist."""
        path = f"/api/queues/{quote(vhost, safe='')}/{quote(name, safe='')}"
        try:
            item = self.http.get_json(path, {"columns": COLUMNS})
        except BrokerError as exc:
            if str(exc).endswith("HTTP 404"):
                return None
            raise
        if self.figures.named(item, ("vhost", "name")) is None:
            raise BrokerError(f"GET {path}: unexpected answer shape")
        return self._queue(item)

    def list_queues(self, columns: str = COLUMNS,
                    extra: dict[str, str] | None = None) -> list[QueueInfo]:
        """Every queue in one unpaged listing; page by page from the poll after one the
        broker could not answer in one request (see the module). A queue created or deleted between two pages shifts the
        pages, which could make a queue look absent (and lose its state) for one poll;
        when the total changes under us the list is read again."""
        params = {"columns": columns, **(extra or {})}
        if self.paged is not None and self.clock() - self.paged > UNPAGED_AGAIN:
            self.paged = None  # the broker may have been only busy: try one answer again
        if self.paged is None:
            try:
                body = self.http.get_json("/api/queues", params, whole=True)
            except SlowAnswer as exc:  # this poll fails (its time is spent); the next pages
                # (a broker that is down or refuses is an outage, not the answer's size)
                log.warning("GET /api/queues in one answer failed (%s): listing queues in "
                            "pages of %d for %.0f s", exc, PAGE_SIZE, UNPAGED_AGAIN)
                self.paged = self.clock()
                raise
            else:
                if isinstance(body, list):
                    return self._queues_of(body)
                pages = self._pages_after(paged(body), params)  # a broker that pages anyway
                if pages is not None:
                    return pages
        for _ in range(3):
            queues = self._fetch_pages(params)
            if queues is not None:
                return queues
        raise BrokerError("GET /api/queues: the queue list kept changing while paging")

    def read_consumers(self) -> dict[QueueKey, tuple[int, int | None]] | None:
        """Each queue's consumers and the sum of their prefetch windows
        (`consumer_windows` of `/api/consumers`, to be read after the queues, so a consumer
        that came meanwhile is listed); None when the list cannot be read."""
        try:
            return consumer_windows(self.http.get_json("/api/consumers",
                                                       {"columns": CONSUMER_COLUMNS}))
        except BrokerError:
            return None

    def with_consumers(self, queues: list[QueueInfo]) -> list[QueueInfo]:
        """The queues with their consumers' prefetch windows (`read_consumers`). Without
        that list no queue gets a bound on its unacknowledged messages; the poll still
        counts."""
        windows = self.read_consumers()
        if windows is None:
            return queues
        return [merged(q, None, windows.get((q.vhost, q.name), NO_CONSUMERS)) for q in queues]

    def _queue(self, item: dict[str, Any]) -> QueueInfo:
        if "effective_policy_definition" not in item:
            item["effective_policy_definition"] = self._policy_of(item)
        return queue_from_json(item, self.figures)

    def _queues_of(self, items: list[Any]) -> list[QueueInfo]:
        return [self._queue(item) for item in items
                if self.figures.named(item, ("vhost", "name")) is not None]

    def _page(self, page: int, params: dict[str, Any]) -> dict[str, Any]:
        return paged(self.http.get_json("/api/queues",
                                        {**params, "page": page, "page_size": PAGE_SIZE}))

    def _fetch_pages(self, params: dict[str, Any]) -> list[QueueInfo] | None:
        return self._pages_after(self._page(1, params), params)

    def _pages_after(self, body: dict[str, Any], params: dict[str, Any]
                     ) -> list[QueueInfo] | None:
        total = body.get("total_count")
        queues = self._queues_of(body["items"])
        pages = page_count(body)
        for page in range(2, pages + 1):
            body = self._page(page, params)
            if body.get("total_count") != total:
                return None
            queues += self._queues_of(body["items"])
        return queues

    def fetch_topology(self) -> Topology:
        """Every exchange's type and alternate exchange and every binding, for exchange
        flow resolution.

        `/api/exchanges` names the policy that applies to an exchange (`policy`) but, unlike
        `/api/queues`, not its definition; that comes from `/api/policies`, read only when
        some exchange has a policy. Operator policies never apply to exchanges."""
        exchanges = self.http.get_json("/api/exchanges",
                              {"columns": "name,vhost,type,arguments,policy"})
        bindings = self.http.get_json("/api/bindings", {
            "columns": "vhost,source,destination,destination_type,routing_key"})
        if not isinstance(exchanges, list) or not isinstance(bindings, list):
            raise BrokerError("GET /api/exchanges or /api/bindings: unexpected answer shape")
        bindings = [b for b in bindings if isinstance(b, dict) and b.get("source")]
        if any(not all(key in b for key in BINDING_KEYS) for b in bindings):
            # leaving one out could hide a stopped destination and release its producers
            raise BrokerError("GET /api/bindings: a binding without "
                              f"{', '.join(BINDING_KEYS)}; keeping the bindings read before")
        exchanges = [e for e in exchanges if isinstance(e, dict) and "name" in e and "vhost" in e]
        policies = self._policies() if any(e.get("policy") for e in exchanges) else {}
        alternates = {}
        for e in exchanges:
            arguments = e.get("arguments")
            definition = policies.get((str(e["vhost"]), str(e.get("policy"))), {})
            alternate = alternate_of(arguments if isinstance(arguments, dict) else {},
                                     definition)
            if alternate is not None:
                alternates[(str(e["vhost"]), str(e["name"]))] = alternate
        return Topology.build(
            {(str(e["vhost"]), str(e["name"])): str(e.get("type", "")) for e in exchanges},
            (Binding(str(b["vhost"]), str(b["source"]), str(b["destination"]),
                     str(b["destination_type"]), str(b.get("routing_key", "")))
             for b in bindings),
            alternates,
        )

    def fetch_alarms(self) -> dict[str, NodeStatus]:
        """Every node's `mem_alarm`, `disk_free_alarm` and `running` (one small GET per
        poll: only these columns). RabbitMQ blocks every publisher of the cluster while
        any running node has one. An empty list is no answer: the node answering is one."""
        statuses = node_statuses(self.http.get_json("/api/nodes", {
            "columns": "name,running,mem_alarm,disk_free_alarm"}))
        if statuses is None:
            raise BrokerError("GET /api/nodes: unexpected answer shape")
        if not statuses:
            raise BrokerError("GET /api/nodes: an empty node list")
        return statuses

    def fetch_cluster_name(self) -> str:
        """The cluster's name (`GET /api/cluster-name`; also each AMQP connection's
        `cluster_name` server property), to check that live depth reads the same broker."""
        body = self.http.get_json("/api/cluster-name")
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str):
            raise BrokerError("GET /api/cluster-name: unexpected answer shape")
        return name

    def fetch_vhosts(self) -> set[str]:
        """Every vhost's name, to tell a quota for a vhost that does not exist."""
        body = self.http.get_json("/api/vhosts", {"columns": "name"})
        if not isinstance(body, list):
            raise BrokerError("GET /api/vhosts: unexpected answer shape")
        return {str(v["name"]) for v in body if isinstance(v, dict) and "name" in v}

    def _policy_of(self, item: dict[str, Any]) -> dict[str, Any]:
        """The effective policy of a listed queue the broker gave none for (statistics
        off, or a new 4.x queue), from the policy lists: read again when older than
        POLICY_TTL, or when the queue names a policy they do not hold (just created)."""
        now = self.clock()
        named = item.get("policy")
        named = named if isinstance(named, str) and named else None
        vhost = str(item["vhost"])
        lists = self._policy_lists
        if lists is None or now - lists[0] > POLICY_TTL or (
                now - lists[0] >= POLICY_SOONEST and named is not None and not any(
                    isinstance(p, dict) and p.get("vhost") == vhost and p.get("name") == named
                    for p in lists[1])):
            policies = self.http.get_json("/api/policies")
            operator = self.http.get_json("/api/operator-policies")
            if not isinstance(policies, list) or not isinstance(operator, list):
                raise BrokerError("GET /api/policies: unexpected answer shape")
            lists = self._policy_lists = (now, policies, operator)
        return effective_definition(vhost, str(item["name"]),
                                    str(item.get("type") or "classic"), named,
                                    lists[1], lists[2])

    def _policies(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every vhost's policy definitions by (vhost, name)."""
        policies = self.http.get_json("/api/policies", {"columns": "vhost,name,definition"})
        if not isinstance(policies, list):
            raise BrokerError("GET /api/policies: unexpected answer shape")
        return {(str(p["vhost"]), str(p["name"])): p["definition"] for p in policies
                if isinstance(p, dict) and "name" in p and "vhost" in p
                and isinstance(p.get("definition"), dict)}

    def close(self) -> None:
        self.http.close()
