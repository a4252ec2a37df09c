"""Prometheus metrics of credit grants: requests, refusals, live grants, outstanding credit.

A collector beside `metrics.FlowCollector`, in the same registry and under the same
`flow_sidecar_` prefix, read from the grant desk at scrape time (on the event loop, like
every read of the desk). Per-queue series exist only for queues with outstanding credit,
labelled `vhost` and `queue` as elsewhere: their number grows with the queues producers
are sending to under grants, never with producers or requests.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sidecar.records.metrics import PREFIX, QUEUE_LABELS
from sidecar.signals.grant_desk import GrantDesk


class GrantCollector:
    """What the grant desk has handed out, and what it still counts against each queue."""

    def __init__(self, desk: GrantDesk) -> None:
        self.desk = desk

    def collect(self) -> Iterator[Metric]:
        """Every family, built from the desk's current ledger (the Collector protocol)."""
        desk = self.desk
        yield CounterMetricFamily(PREFIX + "grant_requests_total", "Credit requests answered "
                                  "(POST /grants/...), granted or not.", value=desk.requests)
        yield CounterMetricFamily(PREFIX + "grant_refusals_total", "Credit requests answered "
                                  "with nothing (no headroom, flow stopped, unknown queue) "
                                  "after their wait.", value=desk.refusals)
        yield CounterMetricFamily(PREFIX + "grant_messages_total", "Messages granted.",
                                  value=desk.messages_granted)
        yield GaugeMetricFamily(PREFIX + "grants_held", "Grants whose lease has not ended.",
                                value=len(desk.held()))
        messages = GaugeMetricFamily(PREFIX + "queue_grant_outstanding_messages", "Messages "
                                     "of credit the queue's last depth sample does not show "
                                     "(held grants, and spent credit not yet in the depth).",
                                     labels=QUEUE_LABELS)
        nbytes = GaugeMetricFamily(PREFIX + "queue_grant_outstanding_bytes", "The same in "
                                   "bytes.", labels=QUEUE_LABELS)
        for (vhost, queue), out in sorted(desk.outstanding_by_queue().items()):
            messages.add_metric([vhost, queue], out.messages)
            nbytes.add_metric([vhost, queue], out.bytes)
        yield messages
        yield nbytes
