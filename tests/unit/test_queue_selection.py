"""Filtering, sorting and paging a listing with RabbitMQ's conventions (api.queue_selection)."""

from __future__ import annotations

import pytest
from hypothesis import given
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
    ("orders.*", False, "orders.eu", True),     # a glob on the whole name, as before
    ("orders.*", False, "xorders.eu", False),
    ("Orders.*", False, "orders.eu", False),    # globs stay case-sensitive
    ("q[?]x", False, "q?x", True),              # glob.escape'd names match themselves
    ("^ord.*eu$", True, "Orders.EU", True),     # regex, case-insensitive, searched
    ("rs\\.e", True, "orders.eu", True),
    ("^eu", True, "orders.eu", False),
])
def test_name_filters_as_rabbitmq_and_as_before(name: str | None, use_regex: bool,
                                                queue: str, passes: bool) -> None:
    assert name_matcher(name, use_regex)(queue) is passes


def test_a_bad_regular_expression_names_the_parameter() -> None:
    with pytest.raises(BadSelection) as refused:
        name_matcher("(", use_regex=True)
    assert refused.value.field == "name" and "name='('" in refused.value.message


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
    assert [r.key for r in selection.matching(ROWS)] == order


def test_filters_by_vhost_and_name_together() -> None:
    assert [r.key for r in Selection(vhost="/", name="A").matching(ROWS)] == [("/", "a")]


def test_pages_as_rabbitmq_pages() -> None:
    rows = [row(f"q{i:02d}") for i in range(7)]
    first, last = Selection(page=1, page_size=3), Selection(page=3, page_size=3)
    assert [r.key[1] for r in first.page_of(rows)] == ["q00", "q01", "q02"]
    assert [r.key[1] for r in last.page_of(rows)] == ["q06"]
    assert paged(last, 1, 7, 9) == {"page": 3, "page_size": 3, "page_count": 3,
                                    "item_count": 1, "filtered_count": 7, "total_count": 9}
    assert Selection(page=1).page_of([]) == []  # page 1 of nothing is an empty page
    with pytest.raises(BadSelection) as refused:
        Selection(page=4, page_size=3).page_of(rows)
    assert refused.value.field == "page"
    assert Selection().page_of(rows) == rows  # no page: everything


@given(st.integers(0, 2000), st.integers(1, 500))
def test_the_pages_cover_every_row_once(items: int, size: int) -> None:
    rows = [row(f"q{i:05d}") for i in range(items)]
    pages = [Selection(page=p, page_size=size).page_of(rows)
             for p in range(1, page_count(items, size) + 1)]
    assert [r for page in pages for r in page] == rows
    assert all(0 < len(page) <= size for page in pages)
