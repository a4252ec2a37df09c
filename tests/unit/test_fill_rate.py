"""The fill-rate estimator, seconds to stop, the warning and its episodes: tables, a 5 s
statistics staircase with jitter, and properties (order, repeats, flapping)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.flow.fill_rate import (
    WARNING_FRACTION,
    WARNING_HORIZON,
    DepthFigure,
    Episodes,
    Estimator,
    FillRate,
    WarningKind,
    WarningPolicy,
    add,
    numbered,
    rate,
    seconds_to_stop,
    track,
    warning,
    warning_policy,
    warning_problems,
)
from sidecar.model import Depth, Level, Thresholds

COUNT = Thresholds(count=Level(900, 500))
BOTH = Thresholds(count=Level(900, 500), size=Level(10_000, 8_000))


def fed(*figures: DepthFigure, estimator: Estimator | None = None) -> Estimator:
    estimator = estimator or Estimator()
    for figure in figures:
        estimator = add(estimator, figure)
    return estimator


def test_a_steady_fill_is_its_slope_in_messages_and_bytes() -> None:
    got = rate(fed(*(DepthFigure(t, 100 + 10 * t, 1000 + 500 * t) for t in range(11))))
    assert got is not None
    assert got.messages == pytest.approx(10) and got.bytes == pytest.approx(500)
    assert (got.since, got.at) == (0, 10)


def test_live_samples_have_counts_only_and_bytes_come_from_statistics() -> None:
    statistics = [DepthFigure(t, 10 * t, 100 * t) for t in (0, 5, 10)]
    live = [DepthFigure(t + 0.5, 10 * t + 5) for t in range(10)]
    got = rate(fed(*statistics, *live))
    assert got is not None and got.messages == pytest.approx(10, rel=0.05)
    assert got.bytes == pytest.approx(100)
    only_live = rate(fed(*live))
    assert only_live is not None and only_live.bytes is None


def test_no_rate_until_the_figures_span_min_span() -> None:
    assert rate(fed(DepthFigure(0, 5))) is None
    assert rate(fed(DepthFigure(0, 5), DepthFigure(1.5, 50))) is None
    assert rate(fed(DepthFigure(0, 5), DepthFigure(2, 50))) is not None


def test_a_repeated_moment_merges_into_the_larger_figure() -> None:
    one = fed(DepthFigure(3, 40, None), DepthFigure(3, 30, 900), DepthFigure(3, 35, 800))
    assert one.figures == (DepthFigure(3, 40, 900),)


def test_figures_older_than_the_window_leave_it() -> None:
    est = fed(*(DepthFigure(t, t) for t in range(50)), estimator=Estimator(window=20))
    assert est.figures[0].at == 29 and est.figures[-1].at == 49
    assert len(fed(*(DepthFigure(t / 10, t) for t in range(500))).figures) == 64


def test_draining_is_negative() -> None:
    got = rate(fed(*(DepthFigure(t, 1000 - 25 * t) for t in range(10))))
    assert got is not None and got.messages == pytest.approx(-25)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_statistics_staircase_with_jitter_gives_the_true_rate(seed: int) -> None:
    """RabbitMQ refreshes its figures every 5 s; the sidecar reads them every second (with
    jitter) and dates each read 5 s back (--broker-stats-lag): a staircase whose steps are
    misdated by up to 5 s. A two-point difference swings between 0 and 5x the rate; the
    fit stays within 20 % of it once the window is full, whatever the phase."""
    rng = random.Random(seed)
    true_rate, est, worst = 40.0, Estimator(), 0.0
    for poll in range(120):
        read = poll + rng.uniform(-0.3, 0.3)
        refreshed = (read // 5) * 5  # the broker's last refresh
        est = add(est, DepthFigure(read - 5, int(true_rate * refreshed)))
        got = rate(est)
        if poll >= 25 and got is not None:
            worst = max(worst, abs(got.messages - true_rate) / true_rate)
    assert worst <= 0.2


@given(st.floats(-500, 500), st.integers(0, 10_000),
       st.lists(st.integers(0, 400), min_size=2, max_size=40, unique=True),
       st.randoms(use_true_random=False))
def test_a_linear_depth_gives_its_slope_in_any_order_with_repeats(
        slope: float, start: int, tenths: list[int], rng: random.Random) -> None:
    moments = [t / 10 for t in tenths]
    figures = [DepthFigure(t, start + slope * t) for t in moments]  # type: ignore[arg-type]
    shuffled = figures + rng.sample(figures, len(figures) // 2)
    rng.shuffle(shuffled)
    est = fed(*shuffled)
    assert est == fed(*sorted(figures, key=lambda f: f.at))  # order and repeats: no matter
    got = rate(est)
    kept = [t for t in moments if t >= max(moments) - Estimator().window]
    if max(kept) - min(kept) < Estimator().min_span:
        assert got is None
    else:
        assert got is not None and got.messages == pytest.approx(slope, abs=1e-6)


@pytest.mark.parametrize(("depth", "fill", "thresholds", "expected"), [
    (Depth(600, 0), FillRate(10, None, 0, 10), COUNT, 30.0),
    (Depth(950, 0), FillRate(10, None, 0, 10), COUNT, 0.0),  # over the stop: now
    (Depth(600, 0), FillRate(-10, None, 0, 10), COUNT, None),  # draining
    (Depth(600, 0), FillRate(0, None, 0, 10), COUNT, None),
    (Depth(600, 0), None, COUNT, None),  # no rate yet
    (Depth(600, 0), FillRate(10, None, 0, 10), Thresholds(), None),  # not watched
    # the nearest stop wins: bytes reach 10,000 in 8 s, messages 900 in 30 s
    (Depth(600, 6_000), FillRate(10, 500, 0, 10), BOTH, 8.0),
    (Depth(600, None), FillRate(10, 500, 0, 10), BOTH, 30.0),  # bytes unknown
    (Depth(600, 6_000), FillRate(-10, 500, 0, 10), BOTH, 8.0),  # bytes fill, count drains
])
def test_seconds_to_stop(depth: Depth, fill: FillRate | None, thresholds: Thresholds,
                         expected: float | None) -> None:
    assert seconds_to_stop(depth, fill, thresholds) == expected


@pytest.mark.parametrize(("depth", "to_stop", "thresholds", "warned"), [
    (Depth(600, 0), 30.0, COUNT, True),  # at the horizon
    (Depth(600, 0), 30.5, COUNT, False),
    (Depth(810, 0), None, COUNT, True),  # 90 % of 900, exactly
    (Depth(809, 0), None, COUNT, False),
    (Depth(0, 9_000), None, BOTH, True),  # either dimension
    (Depth(0, None), None, BOTH, False),
    (Depth(10**6, 0), 0.0, Thresholds(), False),  # flow control off: nothing to warn of
])
def test_warning_table(depth: Depth, to_stop: float | None, thresholds: Thresholds,
                       warned: bool) -> None:
    assert warning(depth, to_stop, thresholds, WarningPolicy()) is warned


def test_the_fraction_is_exact_as_written() -> None:
    policy = warning_policy({WARNING_FRACTION: 0.29})
    assert policy.fraction == Fraction(29, 100)
    assert warning(Depth(29, 0), None, Thresholds(count=Level(100, 50)), policy)


@pytest.mark.parametrize(("values", "key"), [
    ({WARNING_HORIZON: -1}, WARNING_HORIZON),
    ({WARNING_HORIZON: "30"}, WARNING_HORIZON),
    ({WARNING_HORIZON: True}, WARNING_HORIZON),
    ({WARNING_HORIZON: 10**9}, WARNING_HORIZON),
    ({WARNING_FRACTION: 0}, WARNING_FRACTION),
    ({WARNING_FRACTION: 1.5}, WARNING_FRACTION),
    ({WARNING_FRACTION: float("nan")}, WARNING_FRACTION),
    ({WARNING_FRACTION: "0.9"}, WARNING_FRACTION),
])
def test_bad_warning_settings_are_refused_by_name(values: dict[str, object], key: str) -> None:
    problems = warning_problems(values)
    assert [p.key for p in problems] == [key] and key in problems[0].message


def test_good_warning_settings_and_their_precedence() -> None:
    assert warning_problems({WARNING_HORIZON: 0, WARNING_FRACTION: 1}) == []
    assert warning_problems({}) == []
    policy = warning_policy({WARNING_HORIZON: 10}, None,
                            {WARNING_HORIZON: 60, WARNING_FRACTION: 0.8})
    assert policy == WarningPolicy(10.0, Fraction(4, 5))
    assert warning_policy() == WarningPolicy(30.0, Fraction(9, 10))


def test_an_episode_starts_once_and_ends_after_the_quiet_period() -> None:
    state, events = Episodes(), []
    for at, warned in [(0, False), (1, True), (2, True), (3, False), (10, True),
                       (11, False), (25, False), (26, False), (27, True)]:
        state, event = track(state, warned, at, quiet=15)
        events.append(event and (event.kind, event.at, event.episode))
    assert [e for e in events if e] == [(WarningKind.STARTED, 1, 1), (WarningKind.ENDED, 25, 1),
                                        (WarningKind.STARTED, 27, 2)]


@pytest.mark.parametrize(("counted", "floor", "episode"), [
    (0, 0, 1),  # first here and everywhere
    (0, 4, 5),  # a restart kept 4, or the other replicas recorded 4 ended long ago
    (0, 3, 4),  # another replica is in episode 4: this one joins it (floor 3)
    (6, 3, 7),  # this replica is ahead: its own number stands
])
def test_a_starting_episode_is_numbered_after_the_floor(counted: int, floor: int,
                                                         episode: int) -> None:
    state, event = track(Episodes(count=counted), True, 10.0)
    assert event is not None
    state, event = numbered(state, event, floor)
    assert (state.count, event.episode, event.kind) == (episode, episode, WarningKind.STARTED)
    state, ended = track(state, False, 30.0)
    assert ended is not None and numbered(state, ended, 99) == (state, ended)  # ends keep it
    assert ended.episode == episode


def test_an_older_verdict_is_ignored() -> None:
    state, _ = track(Episodes(), True, 10)
    assert track(state, False, 5, quiet=0) == (state, None)


@given(st.lists(st.tuples(st.floats(0, 5), st.booleans()), max_size=80), st.floats(0, 30))
def test_episodes_never_flap(steps: list[tuple[float, bool]], quiet: float) -> None:
    """Starts and ends alternate, a start only on a warning, an end only after `quiet`
    seconds without one; never more episodes than the verdict's rising edges."""
    state, at, kinds, last_warned, rises, before = Episodes(), 0.0, [], None, 0, False
    for gap, warned in steps:
        at += gap
        rises += warned and not before
        before = warned
        state, event = track(state, warned, at, quiet)
        if event is not None:
            kinds.append(event.kind)
            if event.kind is WarningKind.STARTED:
                assert warned
            else:
                assert last_warned is not None and at - last_warned >= quiet and not warned
        if warned:
            last_warned = at
    assert kinds == [WarningKind.STARTED, WarningKind.ENDED] * (len(kinds) // 2) + \
        [WarningKind.STARTED] * (len(kinds) % 2)
    assert state.count <= rises and state.active == (len(kinds) % 2 == 1)
