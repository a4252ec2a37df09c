"""RabbitMQ live depth: a queue's ready count from `queue.declare(passive=True)`.

The management API's figures are refreshed every `collect_statistics_interval` (5 s by
default). A passive declare is answered by the queue itself with the messages it holds
ready at that moment (a message confirmed to its publisher is already counted), in well
under a millisecond, and its consumer count. It has no byte count and leaves out messages
delivered and not yet acknowledged: the engine adds those from the last statistics poll,
bounds them by the consumers' prefetch windows, and estimates the bytes
(`sidecar.flow.live_depth`). A sample is dated before its declare is sent.

One connection per vhost (a connection belongs to one vhost), used only from the live
sampler's thread, with WINDOW channels: the declares of a round go out WINDOW at a time and
their answers are read as they come (`sidecar.broker.passive_declares`; pika's
BlockingConnection, one declare at a time, cost the broker three times as much CPU a
declare and the sidecar three to four times). The broker answers a passive declare of a
queue that is gone by closing its channel (404): that channel is opened again and the
others go on, so a queue deleted under the sampler stalls none of the others. 403 and 405
(no permission, another connection's exclusive queue) close it too; such a queue is not
asked again for a minute. Either way the sample says the queue cannot be read (`ready`
None), and it goes by its statistics. A connection that cannot be had, or drops, is tried
again after a backoff that doubles from 0.5 s up to 30 s, with jitter, its vhost's queues
left out meanwhile; 5 s heartbeats notice a broker that hangs, and a vhost's connection
with nothing to read in a round still hears and sends them. A connection whose broker names
another cluster than the management API (`cluster_name`; a wrong or defaulted AMQP URL)
counts as one that cannot be had: another broker's queue of the same name would give
figures of the wrong queue, and no queue of that name would leave live depth off unseen.
Streams have no ready count here and are never asked about (the hot-set choice leaves them
out).
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pika  # type: ignore[import-untyped]  # pika ships no type information

from sidecar.broker import BrokerError, LiveBatch
from sidecar.broker.passive_declares import Answer, PassiveDeclares
from sidecar.model import LiveSample, QueueKey

log = logging.getLogger("flow_sidecar.live")
HEARTBEAT = 5  # seconds; a broker silent for 3 of them is taken as gone
WINDOW = 16  # declares in flight per connection (docs/benchmarks.md#reads-and-memory-at-10000-queues)
NAME = "flow-sidecar live depth"
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0
REFUSED_FOR = 60.0  # seconds a queue that refused a passive declare is left alone


@dataclass
class _Link:
    """One vhost's connection, and when to try again after a failure."""

    connection: PassiveDeclares | None = None
    retry_at: float = 0.0
    delay: float = 0.0  # the last backoff; 0 while healthy
    error: str | None = None


class RabbitMQLiveDepth:
    """Ready counts by passive declare over AMQP 0-9-1 (a `LiveDepthSource`)."""

    def __init__(self, url: str, *, timeout: float = 5.0,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random,
                 cluster_name: Callable[[], str] | None = None) -> None:
        """`cluster_name`: the management API's (blocking; may raise BrokerError), which
        every connection's broker must name too; None: not checked."""
        params = pika.URLParameters(url)
        if "heartbeat" not in parse_qs(urlsplit(url).query):
            params.heartbeat = HEARTBEAT
        self._params = params
        self._timeout = timeout
        self._home = str(params.virtual_host)
        self._clock, self._monotonic, self._jitter = clock, monotonic, jitter
        self._cluster_name = cluster_name
        self._links: dict[str, _Link] = {}
        self._refused: dict[QueueKey, float] = {}

    def sample(self, keys: Sequence[QueueKey]) -> LiveBatch:
        """Ready counts of `keys`, vhost by vhost (see the module docstring)."""
        by_vhost: dict[str, list[str]] = {}
        for vhost, name in keys:
            by_vhost.setdefault(vhost, []).append(name)
        if not by_vhost:  # keep every connection alive; open the URL's vhost if need be
            by_vhost = {vhost: [] for vhost in {self._home, *self._links}}
        samples: list[LiveSample] = []
        errors: list[str] = []
        for vhost in self._links.keys() - by_vhost.keys():  # heartbeats of the others
            link = self._links[vhost]
            if link.connection is not None:
                by_vhost[vhost] = []
        for vhost, names in by_vhost.items():
            error = self._sample_vhost(vhost, names, samples)
            if error is not None:
                errors.append(f"vhost {vhost!r}: {error}")
        return LiveBatch(samples, "; ".join(errors) or None)

    def close(self) -> None:
        """Close every connection (quietly: the broker may be gone already)."""
        for link in self._links.values():
            self._drop(link)
        self._links.clear()

    # -- internals ---------------------------------------------------------------------
    def _sample_vhost(self, vhost: str, names: list[str], out: list[LiveSample]) -> str | None:
        link = self._links.setdefault(vhost, _Link())
        if link.connection is None and self._monotonic() < link.retry_at:
            return f"retrying at most every {link.delay:.1f} s: {link.error}"
        asked = [name for name in names if not self._left_alone(vhost, name, out)]
        answers: dict[int, Answer] = {}
        try:
            if link.connection is None:
                link.connection = PassiveDeclares(self._for_vhost(vhost), window=WINDOW,
                                                  name=NAME, timeout=self._timeout,
                                                  monotonic=self._monotonic)
                self._check_cluster(link.connection)
                if link.delay:
                    log.info("live depth: AMQP connection to vhost %r is back", vhost)
                link.delay, link.error = 0.0, None
            if asked:
                link.connection.ask(asked, self._clock, answers)
            else:
                link.connection.keep_alive()
        except (OSError, BrokerError) as exc:
            self._failed(link, vhost, f"{type(exc).__name__}: {exc}")
            return link.error
        finally:  # what was read before a failure counts
            out.extend(self._to_sample(vhost, asked[index], answer)
                       for index, answer in sorted(answers.items()))
        return None

    def _left_alone(self, vhost: str, name: str, out: list[LiveSample]) -> bool:
        """True (and an unread sample in `out`) while `name` is left alone after refusing."""
        until = self._refused.get((vhost, name))
        if until is None:
            return False
        if self._monotonic() < until:
            out.append(LiveSample(vhost, name, None, self._clock()))
            return True
        del self._refused[(vhost, name)]
        return False

    def _check_cluster(self, connection: PassiveDeclares) -> None:
        """BrokerError unless `connection`'s broker is the cluster the management API is."""
        if self._cluster_name is None:
            return
        theirs = connection.server_properties.get("cluster_name")
        ours = self._cluster_name()
        if theirs != ours:
            raise BrokerError(f"the AMQP URL reaches cluster {theirs!r}, the management API "
                              f"is cluster {ours!r}: set --amqp-url to that broker's AMQP "
                              "listener")

    def _to_sample(self, vhost: str, name: str, answer: Answer) -> LiveSample:
        if answer.refused is None:
            return LiveSample(vhost, name, answer.ready, answer.at,
                              consumers=answer.consumers, took=answer.took)
        code, text = answer.refused
        if code != 404:  # 404: deleted since the last poll; the polls decide
            log.info("live depth: %r in vhost %r refused a passive declare (%s); left "
                     "to the statistics for %.0f s", name, vhost, text, REFUSED_FOR)
            self._refused[(vhost, name)] = self._monotonic() + REFUSED_FOR
        return LiveSample(vhost, name, None, answer.at)

    def _for_vhost(self, vhost: str) -> pika.URLParameters:
        params = copy.copy(self._params)
        params.virtual_host = vhost
        return params

    def _failed(self, link: _Link, vhost: str, error: str) -> None:
        if link.error is None:
            log.warning("live depth: AMQP connection to vhost %r failed (%s); its queues "
                        "are read from the statistics until it is back", vhost, error)
        self._drop(link)
        link.error = error
        link.delay = min(BACKOFF_MAX, max(BACKOFF_FIRST, link.delay * 2))
        link.retry_at = self._monotonic() + link.delay * (0.5 + self._jitter() / 2)

    @staticmethod
    def _drop(link: _Link) -> None:
        connection, link.connection = link.connection, None
        if connection is not None:
            connection.close()
