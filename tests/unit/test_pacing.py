"""Pacing: the controller and the shares from tables and properties, and a discrete-time
simulation of producers offering 3x what the consumers take, paced against Qpid's binary
stop-and-go (sidecar/flow/state_machine.py) in the same run."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.fill_rate import (
    DepthFigure,
    Estimator,
    FillRate,
    WarningPolicy,
    add,
    rate,
    seconds_to_stop,
    warning,
)
from sidecar.flow.pacing import (
    Pacing,
    Producer,
    drain_rate,
    pace,
    shares,
    suggested_rates,
    target_depth,
    total_rate,
)
from sidecar.flow.state_machine import FlowState, step
from sidecar.model import Depth, Level, Thresholds

COUNT = Thresholds(count=Level(1000, 800))


def test_the_target_is_inside_the_band_below_the_stop() -> None:
    assert target_depth(Level(1000, 800)) == 900
    assert target_depth(Level(1000, 1000)) == 950  # no band: 5 % under the stop
    assert target_depth(Level(1000, 0)) == 500


@pytest.mark.parametrize(("drain", "depth", "thresholds", "total"), [
    (100.0, Depth(900, 0), COUNT, 100.0),  # at the target: exactly the drain
    (100.0, Depth(1050, 0), COUNT, 90.0),  # 150 over: 150 / 15 s less
    (100.0, Depth(600, 0), COUNT, 120.0),  # 300 under: 300 / 15 s more
    (10.0, Depth(5000, 0), COUNT, 0.0),  # never negative
    (100.0, Depth(900, 0), Thresholds(), 0.0),  # nothing watched
    # size: 1,000-byte messages, 3,000 bytes over the byte target 9,000: 200 bytes/s less,
    # 0.2 messages/s
    (100.0, Depth(12, 12_000), Thresholds(size=Level(10_000, 8_000)), 99.8),
    # the tighter dimension wins: the count is at its target, the bytes (13.3 a message)
    # 3,000 over it: 200 bytes/s less is 15 messages/s less
    (100.0, Depth(900, 12_000), Thresholds(Level(1000, 800), Level(10_000, 8_000)), 85.0),
    (100.0, Depth(900, None), Thresholds(Level(1000, 800), Level(10_000, 8_000)), 100.0),
])
def test_total_rate(drain: float, depth: Depth, thresholds: Thresholds, total: float) -> None:
    assert total_rate(drain, depth, thresholds) == pytest.approx(total)


def test_drain_is_published_less_the_net_fill() -> None:
    assert drain_rate(FillRate(50.0, None, 0.0, 10.0), 1500) == 100.0
    assert drain_rate(FillRate(-100.0, None, 0.0, 10.0), 0) == 100.0
    assert drain_rate(FillRate(200.0, None, 0.0, 10.0), 0) == 0.0  # never negative


@pytest.mark.parametrize(("before", "warned", "stopped", "messages", "at", "after"), [
    (Pacing(), False, False, 950, 0, Pacing()),
    (Pacing(), True, False, 100, 0, Pacing(True)),
    (Pacing(), False, True, 100, 0, Pacing(True)),
    (Pacing(True, 5), True, False, 100, 50, Pacing(True)),  # warned again: calm forgotten
    (Pacing(True), False, False, 400, 0, Pacing(True)),  # at half the resume (800)
    (Pacing(True, 3), False, False, 400, 50, Pacing(True)),  # back over it: calm forgotten
    (Pacing(True), False, False, 399, 7, Pacing(True, 7)),  # under it: calm from now...
    (Pacing(True, 7), False, False, 10, 36.9, Pacing(True, 7)),
    (Pacing(True, 7), False, False, 10, 37, Pacing()),  # ...for 30 s: producers send less
    (Pacing(True, 7), False, False, 0, 8, Pacing(True, 7, 8)),  # empty: consumers wait...
    (Pacing(True, 7, 8), False, False, 0, 10.9, Pacing(True, 7, 8)),
    (Pacing(True, 7, 8), False, False, 0, 11, Pacing()),  # ...for 3 s: the offers are low
    (Pacing(True, 7, 8), False, False, 1, 11, Pacing(True, 7)),  # not empty: forgotten
    (Pacing(True, 7, 8), False, True, 0, 11, Pacing(True)),  # stopped (an alarm): paced
])
def test_when_pacing_starts_and_ends(before: Pacing, warned: bool, stopped: bool,
                                     messages: int, at: float, after: Pacing) -> None:
    assert pace(before, warned, stopped, Depth(messages, 0), COUNT, at) == after
    assert pace(before, warned, stopped, Depth(messages, 0), Thresholds(), at) == Pacing()


def test_shares_are_weighted_max_min_fair() -> None:
    producers = [Producer("a", reported_rate=10), Producer("b", reported_rate=None),
                 Producer("c", reported_rate=None, weight=2), Producer("d", stopped=True)]
    got = shares(100.0, producers)
    # a wants 12.5 (1.25 x 10); b and c split the other 87.5 one to two; d gets nothing
    assert got == pytest.approx({"a": 12.5, "b": 87.5 / 3, "c": 175 / 3, "d": 0.0})


def test_when_every_demand_is_met_the_rest_is_spread_by_weight() -> None:
    got = shares(100.0, [Producer("a", reported_rate=20), Producer("b", reported_rate=0)])
    # demands: a 25, b 12.5 (a quarter of its equal share: room to start); 62.5 left
    assert got == pytest.approx({"a": 25 + 62.5 / 2, "b": 12.5 + 62.5 / 2})


def test_no_rate_when_not_paced_and_zero_while_stopped() -> None:
    producers = [Producer("a"), Producer("b")]
    assert suggested_rates(False, False, 100, Depth(900, 0), COUNT, producers) == {}
    assert suggested_rates(True, True, 100, Depth(900, 0), COUNT, producers) == \
        {"a": 0.0, "b": 0.0}
    assert suggested_rates(True, False, 100, Depth(900, 0), COUNT, producers) == \
        {"a": 50.0, "b": 50.0}


producer_lists = st.lists(st.builds(
    Producer, st.text(min_size=1, max_size=3), st.none(),
    st.none() | st.floats(0, 1000), st.floats(0, 5), st.booleans()),
    max_size=8, unique_by=lambda p: p.id)


@given(st.floats(0, 10_000), producer_lists)
def test_shares_never_negative_and_add_up_to_the_total(total: float,
                                                       producers: list[Producer]) -> None:
    got = shares(total, producers)
    assert set(got) == {p.id for p in producers}
    assert all(v >= 0 for v in got.values())
    assert all(got[p.id] == 0 for p in producers if p.stopped or p.weight <= 0)
    if any(not p.stopped and p.weight > 0 for p in producers):
        assert sum(got.values()) == pytest.approx(total, rel=1e-9, abs=1e-6)


@given(st.floats(0, 1e6), st.integers(0, 10**6), st.none() | st.integers(0, 10**9),
       st.integers(1, 10**5), st.integers(0, 10**5))
def test_total_never_negative_and_less_the_deeper(drain: float, messages: int,
                                                  nbytes: int | None, stop: int,
                                                  gap: int) -> None:
    t = Thresholds(count=Level(stop, max(0, stop - gap)))
    assert total_rate(drain, Depth(messages, nbytes), t) >= 0
    assert total_rate(drain, Depth(messages + 1, nbytes), t) <= total_rate(
        drain, Depth(messages, nbytes), t)


# -- the simulation --

STEP = 0.1  # seconds per tick
POLL = 1.0  # the sidecar reads the statistics every second...
REFRESH = 5.0  # ...which the broker refreshes every 5 s, and dates them 5 s back
CONSUMERS = 100.0  # messages/s the consumers take, on average
OFFER = 100.0  # each of three producers offers this: 3x the consumers


@dataclass
class Run:
    """One simulated queue: its depth each tick, the stops, what was consumed and could
    have been."""

    depths: list[float] = field(default_factory=list)
    stops: int = 0
    consumed: float = 0.0
    capacity: float = 0.0

    def amplitude(self, since: float) -> float:
        steady = self.depths[int(since / STEP):]
        return max(steady) - min(steady)


def simulate(paced: bool, seed: int, seconds: float = 120.0) -> Run:
    """Producers and consumers as fluids; the sidecar sees only the broker's 5 s figures,
    runs Qpid's machine on them, and (when `paced`) the estimator, warning and pacing. The
    consumers' rate jitters by +-20 % each second."""
    rng = random.Random(seed)
    producers = [Producer(name) for name in "abc"]
    depth, snapshot, run = 0.0, 0.0, Run()
    state, estimator, pacing, stopped = FlowState(), Estimator(), Pacing(), False
    offered = {p.id: OFFER for p in producers}
    published: list[float] = [0.0]  # cumulative messages published, per tick
    sent_last: dict[str, list[float]] = {p.id: [] for p in producers}
    consumers = CONSUMERS
    for tick in range(int(seconds / STEP)):
        now = tick * STEP
        if tick % int(1 / STEP) == 0:
            consumers = CONSUMERS * rng.uniform(0.8, 1.2)
        if tick % int(REFRESH / STEP) == 0:
            snapshot = depth
        if tick % int(POLL / STEP) == 0:
            seen = Depth(int(snapshot), int(snapshot) * 1000)
            state, events = step(state, seen, COUNT)
            run.stops += sum(e.kind == "overfull" for e in events)
            stopped = state.stopped
            if paced:
                estimator = add(estimator, DepthFigure(now - REFRESH, seen.messages, seen.bytes))
                fill = rate(estimator)
                warned = warning(seen, seconds_to_stop(seen, fill, COUNT), COUNT,
                                 WarningPolicy())
                pacing = pace(pacing, warned, stopped, seen, COUNT, now)
                if fill is not None:
                    window = published[_tick(fill.at)] - published[_tick(fill.since)]
                    reported = [Producer(p.id, reported_rate=sum(sent_last[p.id][-50:]) / 5)
                                for p in producers]
                    drain = drain_rate(fill, window)
                    offered = suggested_rates(pacing.engaged, stopped, drain, seen,
                                              COUNT, reported) or \
                        {p.id: OFFER for p in producers}
        sending = {p.id: 0.0 if stopped else min(OFFER, offered.get(p.id, OFFER))
                   for p in producers}
        for name, per_second in sending.items():
            sent_last[name].append(per_second * STEP)
        inflow = sum(sending.values()) * STEP
        outflow = min(depth + inflow, consumers * STEP)
        depth += inflow - outflow
        run.consumed += outflow
        run.capacity += consumers * STEP
        run.depths.append(depth)
        published.append(published[-1] + inflow)
    return run


def _tick(at: float) -> int:
    return max(0, round(at / STEP))


@pytest.mark.parametrize("seed", range(1, 21))
def test_pacing_against_binary_stop_and_go(seed: int) -> None:
    """Two simulated minutes: paced, at most one stop (the first fill, before any rate is
    known), a depth amplitude at most half of binary's over the second minute, and the
    consumers kept at least 95 % busy. (A 3 s time constant fails it, 5 to 11 stops; so do
    three seeds of 20 if pacing ends as soon as a stop's undershoot is under half the
    resume.)"""
    binary, paced = simulate(False, seed), simulate(True, seed)
    assert binary.stops >= 4  # the saw the issue describes
    assert paced.stops <= 1
    assert paced.amplitude(60) <= 0.5 * binary.amplitude(60)
    assert paced.consumed >= 0.95 * paced.capacity


def test_the_worked_example_of_docs_graded_flow() -> None:
    drain = drain_rate(FillRate(50.0, None, 0.0, 10.0), 1500)
    total = total_rate(drain, Depth(1050, 0), COUNT)
    got = shares(total, [Producer("a", reported_rate=10), Producer("b"),
                         Producer("c", weight=2)])
    assert (drain, total) == (100.0, pytest.approx(90.0))
    assert got == pytest.approx({"a": 12.5, "b": 77.5 / 3, "c": 155 / 3})
