"""The hot-set choice (which queues to sample live, closest to a crossing first, under a
budget): tables for the rules, properties for what must hold for any queues."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sidecar.flow.hot_set import Candidate, HotPolicy, choose, distance, heat, is_hot
from sidecar.flow.state_machine import Depth
from sidecar.flow.thresholds import Level, Thresholds

POLICY = HotPolicy(band=0.2, horizon=3.0, interval=0.05)
COUNT = Thresholds(count=Level(100, 50))
BOTH = Thresholds(count=Level(100, 50), size=Level(10_000, 5_000))


def cand(name: str = "q", messages: int | None = 0, nbytes: int = 0, *,
         thresholds: Thresholds = COUNT, **kw: object) -> Candidate:
    depth = None if messages is None else Depth(messages, nbytes)
    return Candidate(("/", name), thresholds, kw.pop("stopped", False), depth,  # type: ignore[arg-type]
                     **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("candidate", "expected"), [
    (cand(messages=0), 1.01),                      # empty: the whole stop to climb
    (cand(messages=80), 0.21),                     # 21 more messages cross a stop of 100
    (cand(messages=100), 0.01),                    # at the stop: one more crosses
    (cand(messages=101), 0.0),                     # over it: crossing now
    (cand(messages=0, net_rate=10.0), 0.71),       # 30 messages on the way in 3 s
    (cand(messages=90, net_rate=-50.0), 0.11),     # draining: no projection downwards
    (cand(messages=0, statistics=Depth(95, 0)), 0.06),  # the statistics say closer
    (cand(messages=60, stopped=True), 0.11),       # stopped: 11 to fall below resume 50
    (cand(messages=49, stopped=True), 0.0),
    (cand(messages=60, stopped=True, net_rate=-5.0), 0.0),  # 15 draining away in 3 s
    (cand(messages=0, nbytes=9_500, thresholds=BOTH), 0.0501),  # size is nearer
    (cand(messages=40, nbytes=9_000, thresholds=BOTH, stopped=True), 0.4001),  # size last
    (cand(messages=None), None),
])
def test_distance(candidate: Candidate, expected: float | None) -> None:
    got = distance(candidate, POLICY.horizon)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(("candidate", "hot"), [
    (cand(messages=0), False),                                # far, nobody sending
    (cand(messages=80), False),                               # 0.21 > band 0.2
    (cand(messages=81), True),                                # within the band
    (cand(messages=0, net_rate=30.0), True),                  # projected over the stop
    (cand(messages=0, has_producers=True), True),             # producers: always
    (cand(messages=None, has_producers=True), True),          # ... even with no depth yet
    (cand(messages=0, stopped=True), True),                   # stopped: always
    (cand(messages=200, stream=True, stopped=True), False),   # streams: never
    (cand(messages=200, thresholds=Thresholds(), has_producers=True), False),  # disabled
    (cand(messages=None), False),
])
def test_hot(candidate: Candidate, hot: bool) -> None:
    assert is_hot(candidate, POLICY) is hot


def test_closest_first_under_the_budget() -> None:
    candidates = [cand("far", 85), cand("over", 120), cand("near", 99),
                  cand("cold", 0), cand("stopped", 70, stopped=True)]
    assert choose(candidates, 10.0, POLICY, limit=2) == [("/", "over"), ("/", "near")]
    assert choose(candidates, 10.0, POLICY, limit=10) == [
        ("/", "over"), ("/", "near"), ("/", "far"), ("/", "stopped")]
    assert choose(candidates, 10.0, POLICY, limit=0) == []


def test_never_sampled_goes_first_and_waiting_counts_as_closer() -> None:
    sampled_now = {"last_sampled": 10.0}
    assert choose([cand("near", 99, **sampled_now), cand("new", 85)], 10.0, POLICY,
                  limit=1) == [("/", "new")]
    # "far" (0.16) waited 9 intervals beyond one: 0.16 / 10 < 0.02 of "near", sampled
    # one interval ago
    assert choose([cand("near", 99, last_sampled=9.95), cand("far", 85, last_sampled=9.5)],
                  10.0, POLICY, limit=1) == [("/", "far")]


# -- properties --------------------------------------------------------------------------
levels = st.builds(lambda stop, share: Level(stop, max(1, math.floor(stop * share))),
                   st.integers(1, 10_000), st.floats(0.01, 1.0))
thresholds = st.builds(Thresholds, st.none() | levels, st.none() | levels)
candidates = st.lists(st.builds(
    Candidate,
    key=st.tuples(st.just("/"), st.text(min_size=1, max_size=6)),
    thresholds=thresholds,
    stopped=st.booleans(),
    depth=st.none() | st.builds(Depth, st.integers(0, 20_000), st.integers(0, 20_000)),
    statistics=st.none() | st.builds(Depth, st.integers(0, 20_000), st.integers(0, 20_000)),
    has_producers=st.booleans(),
    net_rate=st.floats(-1_000, 1_000),
    bytes_per_message=st.none() | st.floats(1, 1_000),
    last_sampled=st.none() | st.floats(0, 100),
    stream=st.booleans(),
), max_size=30, unique_by=lambda c: c.key)


@given(candidates, st.integers(0, 40))
def test_chosen_are_hot_distinct_and_within_the_budget(cs: list[Candidate], limit: int) -> None:
    chosen = choose(cs, 100.0, POLICY, limit)
    hot = {c.key for c in cs if is_hot(c, POLICY)}
    assert len(chosen) == len(set(chosen)) == min(limit, len(hot))
    assert set(chosen) <= hot


@given(candidates)
def test_stopped_and_producer_queues_are_hot_streams_and_disabled_never(
        cs: list[Candidate]) -> None:
    for c in cs:
        if c.stream or not c.thresholds.enabled:
            assert not is_hot(c, POLICY)
        elif c.stopped and c.depth is not None or c.has_producers:
            assert is_hot(c, POLICY)


@given(candidates, st.integers(1, 40))
def test_closest_first_among_queues_sampled_alike(cs: list[Candidate], limit: int) -> None:
    alike = [Candidate(**{**c.__dict__, "last_sampled": 99.0}) for c in cs]
    chosen = set(choose(alike, 100.0, POLICY, limit))
    heats = {c.key: heat(c, POLICY) for c in alike if is_hot(c, POLICY)}
    left_out = [h for k, h in heats.items() if k not in chosen]
    if chosen and left_out:
        assert max(heats[k] for k in chosen) <= min(left_out)  # type: ignore[type-var]


@given(candidates, st.integers(1, 5))
def test_every_hot_queue_is_sampled_in_time_under_any_budget(cs: list[Candidate],
                                                             spare: int) -> None:
    """Waiting makes a queue closer, so none starves while the budget leaves room beyond
    the queues already at a crossing (distance 0, sampled every round)."""
    hot = [c for c in cs if is_hot(c, POLICY)]
    at_crossing = sum(1 for c in hot if heat(c, POLICY) == 0)
    positive = [h for c in hot if (h := heat(c, POLICY))]
    rounds = len(hot) * (math.ceil(max(positive) / min(positive)) + 2) if positive else 2
    assume(len(hot) > 0 and rounds <= 5_000)  # some queue to sample, in bounded rounds
    last = {c.key: c for c in hot}
    seen: set[tuple[str, str]] = set()
    for n in range(rounds):
        now = 100.0 + n * POLICY.interval
        for key in choose(last.values(), now, POLICY, at_crossing + spare):
            seen.add(key)
            last[key] = Candidate(**{**last[key].__dict__, "last_sampled": now})
        if len(seen) == len(hot):
            break
    assert seen == set(last)
