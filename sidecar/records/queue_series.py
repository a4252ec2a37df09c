"""The per-queue series of `/metrics`, written as Prometheus text directly, a queue at a time.

With 10,000 queues these are about 83,000 samples. Built as prometheus_client metric
families and formatted by `generate_latest` they took 1.3 s a scrape, half of it on the
event loop; written here they take a small fraction of that, and the caller can stop
between queues (`api.routes.metrics` yields to the loop every few hundred) so `/flow` is
never held up behind a scrape. Label values are escaped once per queue and kept.

The families, names and help texts are the ones the sidecar has always exported
(`flow_sidecar_queue_*`, labels `vhost` and `queue`); whether they are exported at all is
`--metrics-per-queue` (see `exported`): the aggregated families of `FlowCollector` and the
vhost families are there either way, as RabbitMQ's own plugin separates aggregated and
per-object metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from prometheus_client.utils import floatToGoString

from sidecar.flow.forecast import shown_rate, shown_seconds
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.thresholds import COUNT, SIZE
from sidecar.model import QueueKey
from sidecar.records.metrics import PREFIX

PerQueue = Literal["auto", "on", "off"]
AUTO_LIMIT = 5000  # above this many queues `auto` leaves the per-queue series out


def exported(mode: PerQueue, queues: int) -> bool:
    """Whether a scrape carries the per-queue series: always (`on`), never (`off`), or
    while the broker has at most `AUTO_LIMIT` queues (`auto`), the point past which the
    exporters RabbitMQ users knew broke down and per-queue series cost more to store than
    most dashboards use."""
    return mode == "on" or (mode == "auto" and queues <= AUTO_LIMIT)


WRITTEN_KEPT = 100_000  # sample values kept written (flags, counters, thresholds repeat)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


Value = Callable[[QueueEntry], float | None]


def _threshold(dim_stop: bool, count: bool) -> Value:
    def value(entry: QueueEntry) -> float | None:
        thresholds = entry.resolution.thresholds
        level = thresholds.count if count else thresholds.size
        return None if level is None else (level.stop if dim_stop else level.resume)
    return value


def _depth(entry: QueueEntry) -> float | None:
    return None if entry.depth is None else entry.depth.messages


def _bytes(entry: QueueEntry) -> float | None:  # unknown (streams): absent, never 0
    return None if entry.depth is None else entry.depth.bytes


# (name, type, help, value of a queue or None for no sample), in the order they are written
FAMILIES: list[tuple[str, str, str, Value]] = [
    ("queue_flow_stopped", "gauge",
     "1 while producers are told the queue is flow stopped.",
     lambda entry: entry.told_stopped),
    ("queue_flow_stopped_total", "counter",
     "Times the queue became flow stopped (Qpid's flowStoppedCount); survives restarts.",
     lambda entry: entry.state.stopped_count),
    ("queue_messages", "gauge",
     "Messages in the queue at the last sample (poll or live).", _depth),
    ("queue_messages_bytes", "gauge",
     "Bytes of messages in the queue at the last sample (live: estimated).", _bytes),
    ("queue_stale", "gauge",
     "1 while the queue's last depth sample is older than --stale-after.",
     lambda entry: entry.stale),
    *[(f"queue_{key.removeprefix('qpid.')}", "gauge",
       (f"{key} in effect, in {dim.unit}; absent while the queue does not watch its "
        f"{dim.name}."), _threshold(key == dim.stop_key, dim is COUNT))
      for dim in (COUNT, SIZE) for key in (dim.stop_key, dim.resume_key)],
    # the forecast (docs/graded-flow.md), as answers show it
    ("queue_fill_rate", "gauge",
     "Net messages/s the queue fills at (negative: draining); absent until known.",
     lambda entry: None if entry.fill is None else shown_rate(entry.fill.messages)),
    ("queue_seconds_to_stop", "gauge",
     ("Seconds until the queue reaches its nearest stop at its fill rate; absent when it "
      "does not fill."), lambda entry: shown_seconds(entry.seconds_to_stop)),
    ("queue_warning", "gauge",
     "1 while the queue is warned (near its stop); advice, it stops nobody.",
     lambda entry: entry.warned),
    ("queue_warnings_total", "counter",
     "Warning episodes the queue has had (counted across restarts).",
     lambda entry: entry.episodes.count),
    ("queue_paced", "gauge",
     "1 while the queue's producers are paced (offered suggestedRate).",
     lambda entry: entry.pacing.engaged),
]
# written only for the queues they concern (docs/graded-flow.md), after FAMILIES: the
# classes of queues that have some (labels vhost, queue, class), the rate of paced queues
CLASS_STOPPED = ("queue_class_stopped", "gauge",
                 "1 while the queue's producer class is stopped (label class).")
SUGGESTED_RATE = ("queue_suggested_rate", "gauge",
                  ("Messages/s offered to all the paced queue's producers together when one "
                   "last asked (0 while it is stopped); absent before that."))
Offered = Callable[[QueueEntry], float | None]


class QueueSeries:
    """Keeps the escaped labels of each queue between scrapes; `scrape()` starts one."""

    def __init__(self, offered: Offered | None = None) -> None:
        self.offered = offered  # a paced queue's total suggestedRate (`PacingOffers`)
        self._labels: dict[QueueKey, str] = {}
        self._written: dict[float, str] = {}

    def number(self, value: float) -> str:
        """A sample value, written as prometheus_client writes it (`7.0`, `8.388608e+07`)
        so the text is the same as before for whoever reads it; each value once."""
        written = self._written.get(value)
        if written is None:
            if len(self._written) >= WRITTEN_KEPT:
                self._written.clear()
            # prometheus_client's own formatter, which it leaves untyped
            written = self._written[value] = floatToGoString(value)  # type: ignore[no-untyped-call]
        return written

    def scrape(self) -> QueueSeriesText:
        """A new scrape's text, to be fed every entry."""
        return QueueSeriesText(self)

    def labels(self, key: QueueKey) -> str:
        """`{queue="...",vhost="..."}` for the queue (in prometheus_client's order),
        escaped once."""
        labels = self._labels.get(key)
        if labels is None:
            labels = self._labels[key] = f'{{queue="{_escape(key[1])}",vhost="{_escape(key[0])}"}}'
        return labels

    def keep_only(self, keys: set[QueueKey]) -> None:
        """Forget the labels of queues that are gone."""
        if len(self._labels) > len(keys):
            self._labels = {key: self._labels[key] for key in keys if key in self._labels}


class QueueSeriesText:
    """One scrape: `add` every entry (a slice at a time), then `text()`."""

    def __init__(self, series: QueueSeries) -> None:
        self.series = series
        self.seen: set[QueueKey] = set()
        self.chunks: list[list[str]] = [[] for _ in FAMILIES]  # per family, one per slice
        self.classes: list[str] = []  # CLASS_STOPPED's lines
        self.rates: list[str] = []  # SUGGESTED_RATE's lines

    def add(self, entries: Sequence[QueueEntry]) -> None:
        """The samples of a slice of queues, one per family that has a value for each;
        kept as one string per family, so the whole text is joined from a few pieces."""
        series, seen = self.series, self.seen
        number = series.number
        lines: list[list[str]] = [[] for _ in FAMILIES]
        for entry in entries:
            key = (entry.vhost, entry.name)
            seen.add(key)
            labels = series.labels(key)
            for (name, _, _, value), out in zip(FAMILIES, lines, strict=True):
                figure = value(entry)
                if figure is not None:
                    out.append(f"{PREFIX}{name}{labels} {number(figure)}\n")
            if entry.producer_classes or entry.pacing.engaged:
                self._graded(entry, labels)
        for chunks, out in zip(self.chunks, lines, strict=True):
            chunks.append("".join(out))

    def _graded(self, entry: QueueEntry, labels: str) -> None:
        """The class and pacing samples of a queue that has classes or is paced."""
        number, states = self.series.number, entry.class_states
        for name in entry.producer_classes:
            state = states.get(name)
            self.classes.append(f'{PREFIX}{CLASS_STOPPED[0]}{labels[:-1]},class="'
                                f'{_escape(name)}"}} {number(bool(state and state.stopped))}\n')
        offered = self.series.offered
        rate = None if offered is None else offered(entry)
        if rate is not None:
            self.rates.append(f"{PREFIX}{SUGGESTED_RATE[0]}{labels} {number(rate)}\n")

    def text(self) -> bytes:
        """Every family with its HELP and TYPE lines, as text format 0.0.4."""
        self.series.keep_only(self.seen)
        parts = []
        families = [(*family[:3], chunks) for family, chunks in zip(FAMILIES, self.chunks,
                                                                    strict=True)]
        families += [(*CLASS_STOPPED, self.classes), (*SUGGESTED_RATE, self.rates)]
        for name, kind, help_text, chunks in families:
            parts.append(f"# HELP {PREFIX}{name} {help_text}\n# TYPE {PREFIX}{name} {kind}\n")
            parts.extend(chunks)
        return "".join(parts).encode()
