"""Prometheus metrics of broker-wide flow control: vhost quotas and broker alarms.

A second collector beside `metrics.FlowCollector`, in the same registry and under the
same `flow_sidecar_` prefix, read from the engine's broker-wide state at scrape time.
Labels are `vhost`, and `node` and `resource` for alarms: their number grows with the
broker's vhosts and nodes, never with queues or producers.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sidecar.flow.engine import FlowEngine
from sidecar.flow.vhost_quota import QUOTA_KEYS
from sidecar.records.metrics import PREFIX


def quota_name(key: str) -> str:
    """`overfullSize` -> `flow_sidecar_vhost_quota_overfull_size`."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
    return f"{PREFIX}vhost_quota_{snake}"


class BrokerWideCollector:
    """Each vhost's total, quota and quota state; each alarm in force."""

    def __init__(self, engine: FlowEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        """Every family, built from the current state (the Collector protocol)."""
        wide = self.engine.broker_wide
        overfull = GaugeMetricFamily(PREFIX + "vhost_store_overfull", "1 while the vhost's "
                                     "quota stops every producer of it (MST-1008).",
                                     labels=["vhost"])
        total = CounterMetricFamily(PREFIX + "vhost_store_overfull_total", "Times the vhost "
                                    "became overfull; survives restarts.", labels=["vhost"])
        messages = GaugeMetricFamily(PREFIX + "vhost_messages", "Messages in the vhost's "
                                     "queues at the last poll.", labels=["vhost"])
        nbytes = GaugeMetricFamily(PREFIX + "vhost_messages_bytes", "Bytes of messages in "
                                   "the vhost's queues at the last poll.", labels=["vhost"])
        quota = {key: GaugeMetricFamily(quota_name(key), f"The vhost quota's {key}; absent "
                                        "when not set.", labels=["vhost"]) for key in QUOTA_KEYS}
        for vhost in sorted(wide.vhosts()):
            state, depth = wide.state(vhost), wide.depth(vhost)
            overfull.add_metric([vhost], float(state.stopped))
            total.add_metric([vhost], state.stopped_count)
            if depth is not None:
                messages.add_metric([vhost], depth.messages)
                if depth.bytes is not None:
                    nbytes.add_metric([vhost], depth.bytes)
            for key, value in (wide.quota(vhost) or {}).items():
                quota[key].add_metric([vhost], value)
        alarm = GaugeMetricFamily(PREFIX + "broker_alarm", "1 while a RabbitMQ memory or disk "
                                  "alarm is in force: every queue's producers are told to "
                                  "stop.", labels=["node", "resource"])
        for raised, _ in wide.alarms():
            alarm.add_metric([raised.node, str(raised.resource)], 1.0)
        yield from (overfull, total, messages, nbytes, *quota.values(), alarm)
