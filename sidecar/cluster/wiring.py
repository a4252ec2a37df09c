"""The parts that make a sidecar a replica sharing its state through the broker
(`--shared-state broker`): the shared reads on every poll, the shared writes for the API,
and webhook delivery through the cluster's queue in place of the local worker.
`sidecar.runtime.build_runtime` calls `share_through_broker` when the option says so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import pika  # type: ignore[import-untyped]  # pika ships no type information

from sidecar.broker.failover import ManagementHttp
from sidecar.broker.global_parameters import GlobalParameters
from sidecar.cluster.amqp_link import AmqpLink
from sidecar.cluster.credit_record import CreditRecord
from sidecar.cluster.grant_owners import GrantOwnership
from sidecar.cluster.reports_record import ReportsRecord, paced_or_stopped
from sidecar.cluster.shared_outbox import SharedOutbox
from sidecar.cluster.shared_writes import SharedWrites
from sidecar.cluster.sync import SharedSync
from sidecar.cluster.webhook_queue import Forwarder, QueueOutbox, SharedWork
from sidecar.config import Settings
from sidecar.flow.engine import FlowEngine, StoreUnavailable
from sidecar.flow.persistence import FlowStore
from sidecar.flow.poller import Poller
from sidecar.records.filled_by import FilledBy
from sidecar.signals.producer_reports import ProducerReports
from sidecar.signals.webhook_delivery import WebhookDelivery

DELIVERY_QUEUE = "flow-sidecar.webhooks"
PREFETCH = 1000  # events the delivering replica holds unacknowledged at most


def amqp_endpoints(settings: Settings) -> list[pika.ConnectionParameters]:
    """Where the delivery queue is reached: --shared-amqp-url, else each management URL's
    host on port 5672; always with the management credentials."""
    given = settings.shared_amqp_url or settings.amqp_hosts()
    credentials = pika.PlainCredentials(settings.management_user,
                                        settings.management_password.get_secret_value())
    endpoints = []
    for item in given:
        parts = urlsplit(item if "://" in item else f"amqp://{item}")
        endpoints.append(pika.ConnectionParameters(
            parts.hostname or "127.0.0.1", parts.port or 5672, settings.shared_vhost,
            credentials, heartbeat=10, blocked_connection_timeout=30, socket_timeout=5,
            connection_attempts=1,
            client_properties={"connection_name": "flow-sidecar webhook delivery"}))
    return endpoints


@dataclass
class SharedParts:
    """What sharing adds to a runtime: the API's writes, the background work, and the
    parts behind them (for tests and operators' debugging)."""

    writes: SharedWrites
    sync: SharedSync
    queue: QueueOutbox
    forwarder: Forwarder
    work: SharedWork
    owners: GrantOwnership
    credit: CreditRecord
    reports: ReportsRecord


def share_through_broker(settings: Settings, *, engine: FlowEngine, store: FlowStore,
                         outbox: SharedOutbox, poller: Poller,
                         local_delivery: WebhookDelivery, reports: ProducerReports,
                         filled: FilledBy) -> SharedParts:
    """Wire the shared reads (and the shared producer `reports`) into the poller and build
    the shared writes and the queue-based webhook delivery (with `local_delivery`'s retry
    options)."""
    http = ManagementHttp(settings.management_url, settings.management_user,
                          settings.management_password.get_secret_value(),
                          timeout=settings.request_timeout)
    params = GlobalParameters(http)
    engine.version_clock = time.time
    writes = SharedWrites(engine, outbox, params)
    owners = grant_owners(settings)
    # a busy vhost's record is raised about once a poll, as often as the heartbeat
    credit = CreditRecord(params, owners, ahead=settings.poll_interval)
    sync = SharedSync(engine, store, outbox, params, writes,
                      join_window=3 * settings.poll_interval + settings.broker_stats_lag,
                      owners=owners)
    poller.companions.append(sync)
    engine.figures.episode_floor = sync.episode_floor  # warning episodes numbered alike
    poller.on_snapshot.append(sync.publish)
    record = ReportsRecord(params, owners, reports, paced_or_stopped(engine, filled))
    sync.on_view.append(record.observe)
    poller.on_snapshot.append(record.on_poll)
    disabling: set[asyncio.Task[None]] = set()

    def disable(sub_id: str, reason: str) -> None:
        """A 410: stop the subscription's streams here at once, then everywhere."""
        outbox.set_enabled(sub_id, False, reason)
        task = asyncio.ensure_future(
            _disable_everywhere(writes, sub_id, reason, retry=settings.poll_interval))
        disabling.add(task)
        task.add_done_callback(disabling.discard)

    queue = QueueOutbox(outbox, ack=lambda generation, tag: link.ack(generation, tag),
                        disable=disable)
    link = AmqpLink(amqp_endpoints(settings), queue_name=DELIVERY_QUEUE, prefetch=PREFETCH,
                    on_message=queue.receive, on_reset=queue.reset)
    delivery = WebhookDelivery(queue, timeout=local_delivery.timeout,
                               retry=local_delivery.retry,
                               concurrency=local_delivery.concurrency,
                               retention=local_delivery.retention,
                               transport=local_delivery.transport)
    forwarder = Forwarder(outbox, link)
    work = SharedWork(link=link, forwarder=forwarder, delivery=delivery)
    return SharedParts(writes, sync, queue, forwarder, work, owners, credit, record)


def grant_owners(settings: Settings) -> GrantOwnership:
    """Who grants credit on which vhost. A replica counts as gone once its heartbeat (one a
    poll) is 3 polls and a broker request's timeout old."""
    return GrantOwnership(
        settings.advertise_url or f"http://{settings.listen}",
        dead_after=3 * settings.poll_interval + settings.request_timeout,
        spendable=settings.grant_lease_max)


async def _disable_everywhere(writes: SharedWrites, sub_id: str, reason: str, *,
                              retry: float) -> None:
    while True:
        try:
            await writes.set_webhook_enabled(sub_id, False, reason)
            return
        except StoreUnavailable:
            await asyncio.sleep(retry)
