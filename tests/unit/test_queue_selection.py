"""Filtering, sorting and paging a listing with RabbitMQ's conventions (api.queue_selection)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.queue_selection import (
    BadSelection,
    Row,
    Selection,
    name_matcher,
    page_count,
    paged,
)


def row(name: str, stopped: bool = False, messages: int = 0, vhost: str = "/",
        stops: int = 0) -> Row:
    return Row((vhost, name), stopped, messages, messages * 10, stops)


@pytest.mark.parametrize(("name", "use_regex", "queue", "passes"), [
    (None, False, "anything", True),
    ("", False, "anything", True),
    ("ORD", False, "orders.eu", True),          # RabbitMQ: case-insensitive substring
    ("eu", False, "orders.eu", True),
    ("us", False, "orders.eu", False),
    ("orders.*", False, "orders.eu", True),     # a pattern: the names matched off the loop
    ("orders.*", False, "xorders.eu", False),
    ("^ord.*eu$", True, "orders.eu", True),
    ("ord", True, "xorders.eu", False),         # with use_regex, never a substring
])
def test_name_filters_as_rabbitmq_and_as_before(name: str | None, use_regex: bool,
                                                queue: str, passes: bool) -> None:
    assert name_matcher(name, use_regex, passing={"orders.eu"})(queue) is passes


@pytest.mark.parametrize(("name", "use_regex", "pattern"), [
    (None, True, None), ("", True, None), ("orders", False, None),
    ("orders", True, ("regex", "orders")), ("q[?]x", False, ("glob", "q[?]x")),
    ("*", True, ("regex", "*")),                # a regular expression, even with glob chars
])
def test_which_names_are_patterns(name: str | None, use_regex: bool,
                                  pattern: tuple[str, str] | None) -> None:
    assert Selection(name=name, use_regex=use_regex).pattern == pattern


ROWS = [row("b", messages=5, stops=1), row("a", stopped=True, messages=1),
        row("c", stopped=True, messages=9, stops=3), row("a", vhost="v2", messages=7)]


@pytest.mark.parametrize(("sort", "reverse", "order"), [
    ("name", False, [("/", "a"), ("/", "b"), ("/", "c"), ("v2", "a")]),
    ("name", True, [("v2", "a"), ("/", "c"), ("/", "b"), ("/", "a")]),
    ("stopped", False, [("/", "a"), ("/", "c"), ("/", "b"), ("v2", "a")]),
    ("messages", False, [("/", "c"), ("v2", "a"), ("/", "b"), ("/", "a")]),
    ("bytes", False, [("/", "c"), ("v2", "a"), ("/", "b"), ("/", "a")]),
    ("flowStoppedCount", False, [("/", "c"), ("/", "b"), ("/", "a"), ("v2", "a")]),
])
def test_sorts(sort: str, reverse: bool, order: list[tuple[str, str]]) -> None:
    selection = Selection(sort=sort, sort_reverse=reverse)  # type: ignore[arg-type]
    assert [r.key for r in selection.page_of([selection.run(ROWS)])[0]] == order
    # the same when the rows come in slices, each run on its own, then merged
    runs = [selection.run(ROWS[:1]), selection.run(ROWS[1:3]), selection.run(ROWS[3:])]
    assert [r.key for r in selection.page_of(runs)[0]] == order


def test_filters_by_vhost_and_name_together() -> None:
    selection = Selection(vhost="/", name="A")
    assert selection.page_of([selection.run(ROWS)]) == ([ROWS[1]], 1)


def test_pages_as_rabbitmq_pages() -> None:
    rows = [row(f"q{i:02d}") for i in range(7)]
    first, last = Selection(page=1, page_size=3), Selection(page=3, page_size=3)
    assert [r.key[1] for r in first.page_of([first.run(rows)])[0]] == ["q00", "q01", "q02"]
    assert last.page_of([last.run(rows)]) == ([rows[6]], 7)
    assert paged(last, 1, 7, 9) == {"page": 3, "page_size": 3, "page_count": 3,
                                    "item_count": 1, "filtered_count": 7, "total_count": 9}
    assert Selection(page=1).page_of([([], 0)]) == ([], 0)  # page 1 of nothing: empty
    kept, passed = first.run(rows)  # a run keeps only what page 1 can show, counts all
    assert (len(kept), passed) == (3, 7)
    with pytest.raises(BadSelection) as refused:
        Selection(page=4, page_size=3).page_of([first.run(rows)])
    assert refused.value.field == "page"
    everything = Selection()
    assert everything.page_of([everything.run(rows)]) == (rows, 7)  # no page: everything


@settings(deadline=None)
@given(st.integers(0, 300), st.integers(1, 120), st.integers(1, 100),
       st.sampled_from(["name", "stopped", "messages"]), st.booleans())
def test_the_pages_cover_every_row_once_in_order(items: int, size: int, slice_size: int,
                                                 sort: str, reverse: bool) -> None:
    rows = [row(f"q{(i * 7919) % 2003:05d}", stopped=i % 5 == 0, messages=i % 11)
            for i in range(items)]
    every = Selection(sort=sort, sort_reverse=reverse)  # type: ignore[arg-type]
    whole = every.page_of([every.run(rows)])[0]
    pages = []
    for p in range(1, page_count(items, size) + 1):
        one = Selection(sort=sort, sort_reverse=reverse,  # type: ignore[arg-type]
                        page=p, page_size=size)
        runs = [one.run(rows[i:i + slice_size]) for i in range(0, items, slice_size)]
        pages.append(one.page_of(runs)[0])
    assert [r for page in pages for r in page] == whole
    assert sorted(whole) == sorted(rows)
    assert all(0 < len(page) <= size for page in pages)
