"""The live sampler: the hot queues' depth every `--live-interval`, between statistics polls.

It sits beside the statistics poller (`poller.py`) and feeds the same engine. After each
poll it scans every queue once for the hot set (`hot_set.heat`, kept per entry revision);
every interval it ranks the hot queues, with the queues that have active producers and
those it sampled last round (`hot_set.rank`), asks the `LiveDepthSource` for as many as the
budget's tokens allow and steps the engine on the answers (`FlowEngine.apply_live`). The
tokens the hot set leaves go to every other watched queue in turn (round-robin), up to
an idle budget of their own, so a burst into a queue the statistics show idle is seen at
live speed too: with N watched queues and an idle budget of I a second, each is read at
least every N / I seconds (`full_pass_seconds` measures it). The idle budget is the
smaller one because those reads are mostly of queues far from any crossing, while each
costs the broker as much as a hot one: at 10,000 idle queues, 1,000 reads a second spent
on them cost the broker over a quarter of a core for a turn of 10 s, hardly sooner than
the statistics. `hot_gap` keeps the longest wait between two reads of a hot queue, which
says whether the budget keeps up with the hot set.

The source blocks (a socket), so its calls run one at a time in a thread of the sampler's
own and their results come back to the event loop through `call_soon_threadsafe`: the
engine is only ever touched from the loop. A source that cannot connect changes nothing:
the queues keep their statistics, `/healthz` and `/metrics` say so, and the source
retries by itself with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

from sidecar.broker import LiveBatch, LiveDepthSource
from sidecar.flow.engine import FlowEngine
from sidecar.flow.hot_set import Candidate, HotPolicy, heat, rank, watchable
from sidecar.flow.live_depth import live_can_release
from sidecar.flow.queue_entry import QueueEntry
from sidecar.flow.slices import SLICE, Steps, drain
from sidecar.flow.state_machine import Depth
from sidecar.model import LiveSample, QueueKey

log = logging.getLogger("flow_sidecar.live")
T = TypeVar("T")
KEEPALIVE = 1.0  # seconds between calls while nothing is hot (heartbeats, health)
GAP_WINDOW = 10.0  # seconds over which the longest wait between two reads of a hot queue is kept
Job = tuple[Callable[[], Any], "asyncio.Future[Any] | None", "asyncio.AbstractEventLoop | None"]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class BlockingWorker:
    """One daemon thread that runs blocking calls in order and hands each result to the
    caller's event loop. A daemon, so that a call stuck on a hung broker cannot hold up
    the process's exit."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def submit(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """Run `call` in the thread; its result (or exception) as a future of this loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._thread.is_alive():
            self._thread.start()
        self._jobs.put((call, future, loop))
        return future

    def stop(self, last: Callable[[], object]) -> None:
        """Run `last` after the calls already queued, then end the thread. Does not wait."""
        if self._thread.is_alive():
            self._jobs.put((last, None, None))
            self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, future, loop = job
            result: Any = None
            error: BaseException | None = None
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001  (handed to the awaiting coroutine)
                error = exc
            if future is not None and loop is not None:
                try:
                    loop.call_soon_threadsafe(_settle, future, result, error)
                except RuntimeError:  # the loop closed meanwhile: nobody is waiting
                    return
            elif error is not None:
                log.warning("live depth: %s", error)


class Tokens:
    """A budget's tokens: `rate` a second, at most two rounds' worth (at least two), so
    that a round that ran long (slow answers) is made up by the next and the budget is
    reached on average whenever the declares can keep up with it."""

    def __init__(self, rate: float, interval: float, start: float) -> None:
        self.rate = rate
        self.held = start
        self.capacity = 2 * max(1.0, rate * interval)

    def refill(self, elapsed: float) -> None:
        self.held = min(self.capacity, self.held + self.rate * elapsed)

    def whole(self) -> int:
        """The reads the tokens pay for now, a thousandth of a read short counting as
        whole: a round on schedule begins an interval after the last less the event
        loop's nanosecond of tolerance (249.999995 tokens at 5,000 a second), and floats
        make 0.05 s at 40 a second 1.9999999; either cost a round a read."""
        return int(self.held + 1e-3)


class LongestGap:
    """The longest wait between two reads of one hot queue, over the last whole window of
    GAP_WINDOW seconds: what an operator checks against the reaction time they need (1,000
    queues near their stop, each read at least every 250 ms, needs a budget of 4,000)."""

    def __init__(self) -> None:
        self.last: float | None = None  # the last whole window's; None before one ended
        self._current = 0.0
        self._since: float | None = None

    def note(self, now: float, gaps: Iterable[float]) -> None:
        """This round's waits, at `now`; a window that ended is closed first."""
        if self._since is None or now - self._since >= GAP_WINDOW:
            if self._since is not None:
                self.last = self._current
            self._current, self._since = 0.0, now
        self._current = max(self._current, max(gaps, default=0.0))


def _same_inputs(inputs: tuple[object, ...], entry: QueueEntry, has_producers: bool) -> bool:
    """Whether the entry still has the very objects a scan worked its heat out from."""
    return (inputs[0] is entry.info and inputs[1] is entry.depth and inputs[2] is entry.state
            and inputs[3] is entry.resolution and inputs[4] is entry.live
            and inputs[5] is has_producers)


class LiveSampler:
    """Samples the hot queues' live depth and applies it to the engine."""

    def __init__(
        self,
        source: LiveDepthSource,
        engine: FlowEngine,
        policy: HotPolicy,
        *,
        budget: float,
        idle_budget: float,
        producer_queues: Callable[[], Collection[QueueKey]] = frozenset,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.engine = engine
        self.policy = policy
        self.budget = budget  # passive declares per second, at most
        # of them, for the rotation of queues outside the hot set
        self.idle_budget = min(idle_budget, budget)
        self.producer_queues = producer_queues
        self.clock = clock
        self.on_samples: list[Callable[[list[LiveSample], float], None]] = []
        self.connected: bool | None = None  # None until the source was first asked
        self.last_error: str | None = None
        self.last_sample_at: float | None = None
        self.hot = 0  # queues in the hot set at the last round
        self.samples = 0  # live samples applied, ever
        self.errors = 0  # rounds that could not read every queue asked for
        self._scanned: set[QueueKey] = set()
        # a queue's heat, kept while its entry's revision (depth, state, thresholds, rates)
        # and whether it has producers stand: most hot queues did not change since the
        # last round, and a round ranks every one of them
        self._heats: dict[QueueKey, tuple[int, bool, float | None]] = {}
        # each queue's heat and watchability at the last scan, with what they came from
        self._scans: dict[QueueKey, tuple[tuple[object, ...], float | None, bool]] = {}
        self._asked: dict[QueueKey, float] = {}  # when each hot queue was last asked about
        self.hot_gap = LongestGap()
        self._last_keys: list[QueueKey] = []
        # the watched queues outside the hot set, read in turn with the tokens left over
        self._rotation: list[QueueKey] = []
        self._cursor = 0
        self._pass_started: float | None = None
        self.full_pass_seconds: float | None = None  # the last full turn of the rotation
        self.watched = 0  # queues live depth can read (hot or in the rotation)
        # a round's worth to start with (at least one read; none idle with no idle budget)
        self._tokens = Tokens(budget, policy.interval, max(1.0, budget * policy.interval))
        self._idle_tokens = Tokens(self.idle_budget, policy.interval,
                                   self.idle_budget * policy.interval)
        self._refilled: float | None = None
        self._last_call = -KEEPALIVE
        self._worker = BlockingWorker("live-depth")
        self._hurried: asyncio.Event | None = None  # set by `hurry`, made by `run`

    def rescan(self) -> None:
        """Every queue's hotness, once (after each statistics poll), at once."""
        drain(self.rescan_in_slices())

    def rescan_in_slices(self) -> Steps[None]:
        """`rescan`, yielding every SLICE queues (`sidecar.flow.slices`); the rounds in
        between go on with the hot set of the scan before, until this one is whole."""
        producers = self.producer_queues()
        # into the cache: the first round after the poll then finds every heat computed
        scanned, rotation = set(), []
        scans = self._scans  # kept: a new table of every queue per poll cost 1-2 ms
        count = 0
        for count, entry in enumerate(self.engine.entries(), 1):
            key, has_producers = entry.key, entry.key in producers
            scan = scans.get(key)
            # what its heat and watchability are worked out from (`_candidate`), by
            # identity: a queue the poll only dated again (`FigureIntake.redate`) keeps them
            if scan is None or not _same_inputs(scan[0], entry, has_producers):
                inputs = (entry.info, entry.depth, entry.state, entry.resolution, entry.live,
                          has_producers)
                if scan is None or scan[0] != inputs:  # else equal new objects
                    candidate = self._candidate(entry, producers)  # once: heat, watchability
                    d = heat(candidate, self.policy)
                    scan = (inputs, d, d is None and watchable(candidate))
                else:
                    scan = (inputs, scan[1], scan[2])
                scans[key] = scan
            d = scan[1]
            if d is not None or has_producers:  # the queues a round ranks
                self._heats[key] = (entry.revision, has_producers, d)
            if d is not None:
                scanned.add(key)
            elif scan[2]:
                rotation.append(key)
            if count % SLICE == 0:
                yield
        if len(scans) != count:  # some queues are gone (in C: nearly always none)
            for key in scans.keys() - self.engine.keys():
                del scans[key]
        self._scanned, self._rotation = scanned, rotation
        self._cursor %= max(1, len(rotation))
        self.watched = len(scanned) + len(rotation)
        kept = scanned | set(producers)
        for cache in (self._heats, self._asked):  # as few as the hot queues: no full copy
            for key in [k for k in cache if k not in kept]:
                del cache[key]

    async def run(self) -> None:
        """Sample every interval until cancelled; then release the source, in its thread."""
        loop = asyncio.get_running_loop()
        hurried = self._hurried = asyncio.Event()
        previous: float | None = None
        try:
            while True:
                started = loop.time()
                hurried.clear()
                try:
                    await self.round(None if previous is None else started - previous)
                except Exception as exc:  # e.g. the disk is full: log, go on next round
                    self._note_error(f"{type(exc).__name__}: {exc}")
                    log.exception("live depth round failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hurried.wait(), max(
                        0.0, self.policy.interval - (loop.time() - started)))
                previous = started
        finally:
            self._worker.stop(self.source.close)

    def hurry(self) -> None:
        """Start the next round now instead of at the end of the interval: credit a
        producer says the broker confirmed comes back at the first upper bound read after
        its release (`sidecar.signals.grants`), so waiting out the interval would hold it
        for up to `--live-interval` more. The budget's tokens still bound the declares:
        a hurried round without tokens reads nothing."""
        if self._hurried is not None:
            self._hurried.set()

    async def round(self, elapsed: float | None = None) -> list[LiveSample]:
        """Choose the queues of this round, read them in the worker thread, apply.

        `elapsed`: the seconds since the last round began by `run`'s schedule, which
        earn this round's tokens; None: by `clock`. A round on schedule began at least
        an interval after the last, but `clock` is read a moment into it: a read 0.3 ms
        later in one round than in the next cost the next a token, and with 1,000 hot
        queues at 250 reads a round one of them waited a fifth round (250 ms) where its
        turn was every fourth (200 ms)."""
        now = self.clock()
        self._refill(now, elapsed)
        producers = self.producer_queues()
        hot = []
        for key in self._scanned | set(producers) | set(self._last_keys):
            entry = self.engine.entry(key)
            if entry is not None and (d := self._heat(entry, producers)) is not None:
                hot.append((key, d, self._asked.get(key)))
        self.hot = len(hot)
        tokens = self._tokens.whole()
        chosen = rank(hot, now, self.policy.interval, tokens)
        asked = self._asked
        self.hot_gap.note(now, (now - asked[key] for key in chosen if key in asked))
        turn = self._turn(min(tokens - len(chosen), self._idle_tokens.whole()),
                          set(chosen), now)
        self._idle_tokens.held -= len(turn)
        chosen += turn
        if not chosen and now - self._last_call < KEEPALIVE:
            return []
        self._tokens.held -= len(chosen)
        self._last_call = now
        self._asked.update(dict.fromkeys(chosen, now))
        batch: LiveBatch = await self._worker.submit(lambda: self.source.sample(chosen))
        self._last_keys = chosen
        if batch.error is None:
            if self.last_error is not None:
                log.info("live depth: reading queues again")
            self.connected, self.last_error = True, None
        else:
            self._note_error(batch.error)
        if batch.samples:
            self.samples += len(batch.samples)
            self.last_sample_at = max(s.at for s in batch.samples)
            done = self.clock()
            self.engine.apply_live(batch.samples, done)
            for hook in self.on_samples:
                try:
                    hook(batch.samples, done)
                except Exception:
                    log.exception("live sample hook failed")
        return batch.samples

    def _note_error(self, error: str) -> None:
        self.errors += 1
        self.connected = False
        self.last_error = error

    def _turn(self, spare: int, taken: set[QueueKey], now: float) -> list[QueueKey]:
        """Up to `spare` queues of the rotation, where the last round left off."""
        rotation = self._rotation
        picked: list[QueueKey] = []
        for _ in range(min(spare, len(rotation))):
            if self._cursor == 0:
                if self._pass_started is not None:
                    self.full_pass_seconds = now - self._pass_started
                self._pass_started = now
            key = rotation[self._cursor]
            self._cursor = (self._cursor + 1) % len(rotation)
            if key not in taken:
                picked.append(key)
        return picked

    def _refill(self, now: float, elapsed: float | None) -> None:
        """Both budgets' tokens, for the time since the last round (`round`)."""
        if elapsed is None and self._refilled is not None:
            elapsed = max(0.0, now - self._refilled)
        if elapsed is not None:
            self._tokens.refill(elapsed)
            self._idle_tokens.refill(elapsed)
        self._refilled = now

    def _heat(self, entry: QueueEntry, producers: Collection[QueueKey]) -> float | None:
        has_producers = entry.key in producers
        cached = self._heats.get(entry.key)
        if cached is not None and cached[:2] == (entry.revision, has_producers):
            return cached[2]
        d = heat(self._candidate(entry, producers), self.policy)
        self._heats[entry.key] = (entry.revision, has_producers, d)
        return d

    @staticmethod
    def _candidate(entry: QueueEntry, producers: Collection[QueueKey]) -> Candidate:
        info = entry.info
        statistics = None
        if info.messages is not None:  # they may say otherwise (older, or held back)
            statistics = Depth(info.messages, info.bytes or 0)
            if statistics == entry.depth:
                statistics = None  # the same figures: one distance to work out, not two
        return Candidate(
            key=entry.key, thresholds=entry.resolution.thresholds,
            stopped=entry.state.stopped, depth=entry.depth, statistics=statistics,
            has_producers=entry.key in producers,
            net_rate=(info.publish_rate or 0.0) - (info.deliver_rate or 0.0),
            bytes_per_message=entry.bytes_per_message,
            last_sampled=entry.live.at if entry.live is not None else None,
            stream=info.queue_type == "stream",
            releasable=live_can_release(info, entry.resolution.thresholds),
        )
