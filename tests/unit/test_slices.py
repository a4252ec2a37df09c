"""Garbage collection kept out of a wake-up's writes (`collections_deferred`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sidecar.flow.slices import collections_deferred


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_no_collection_inside_and_the_collector_back_after() -> None:
    with collections_deferred():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_bursts_turn_it_back_on_only_when_the_last_ends() -> None:
    first, second = collections_deferred(), collections_deferred()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first burst ends while the second still writes
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_failing_burst_turns_it_back_on() -> None:
    with pytest.raises(RuntimeError), collections_deferred():
        raise RuntimeError("a write failed")
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with collections_deferred():
        pass
    assert not gc.isenabled()
