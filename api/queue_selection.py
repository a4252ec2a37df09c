"""Which queues a listing shows, in which order, and which page of them (pure).

`GET /queues` and `GET /queues/history` answer 10,000 queues; a person looks at a page.
The conventions are RabbitMQ's management API's, so its users need learn nothing new:
`page` (from 1) and `page_size` (at most 500) select a page and the answer is RabbitMQ's
paged object; `name` filters case-insensitively by substring, or as a regular expression
with `use_regex=true`. One addition keeps the sidecar's earlier clients working: a `name`
holding a glob character (`*`, `?`, `[`) is a glob on the whole name, as before. Patterns
are matched by the caller off the event loop (`api.name_filter_worker`); a run is given
the names that passed.

Selecting works on `Row`s (a few fields per queue), so sorting and filtering 10,000 queues
costs a pass over small tuples and only the page's queues are turned into full answers.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sidecar.model import QueueKey
from sidecar.name_patterns import Kind

MAX_PAGE_SIZE = 500  # RabbitMQ's own cap on page_size
GLOB_CHARACTERS = frozenset("*?[")
Sort = Literal["name", "stopped", "messages", "bytes", "flowStoppedCount"]
SORTS: tuple[Sort, ...] = ("name", "stopped", "messages", "bytes", "flowStoppedCount")


class Row(NamedTuple):
    """What selecting needs of one queue: its key and the figures it may be sorted by."""

    key: QueueKey
    stopped: bool
    messages: int
    bytes: int
    stops: int


class BadSelection(ValueError):
    """A parameter that selects nothing sensible; `field` names it for the 400."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def name_pattern(name: str | None, use_regex: bool = False) -> tuple[Kind, str] | None:
    """The pattern `name` is, when it is one: a regular expression (`use_regex`), else a
    glob when it holds glob characters; None for no filter or a substring."""
    if not name:
        return None
    if use_regex:
        return "regex", name
    if GLOB_CHARACTERS & set(name):
        return "glob", name
    return None


def name_matcher(name: str | None, use_regex: bool = False,
                 passing: Collection[str] = ()) -> Callable[[str], bool]:
    """Whether a queue name passes `name`: a case-insensitive substring, as RabbitMQ's
    management API filters; for a pattern (`name_pattern`), the names in `passing`, which
    the caller had matched off the event loop (`api.name_filter_worker`)."""
    if not name:
        return lambda _: True
    if name_pattern(name, use_regex) is not None:
        return passing.__contains__
    folded = name.casefold()
    return lambda queue: folded in queue.casefold()


def order_of(sort: Sort, row: Row) -> tuple[Any, ...]:
    """The row's place in the order of `sort`, as a tuple sorted without a key function
    (C-level comparisons); ties go by (vhost, queue). `stopped` puts stopped queues first,
    the figures go from the largest down, `name` goes by vhost, then queue."""
    if sort == "stopped":
        return not row.stopped, row.key, row
    if sort == "messages":
        return -row.messages, row.key, row
    if sort == "bytes":
        return -row.bytes, row.key, row
    if sort == "flowStoppedCount":
        return -row.stops, row.key, row
    return row.key, row


Run = list[tuple[Any, ...]]  # rows in their order, each behind its place (see `order_of`)
Passed = tuple[Run, int]  # a slice's run, as far as the page reaches, and its rows that passed


@dataclass(frozen=True)
class Selection:
    """A listing's parameters: filter, order and, when `page` is set, one page.

    Rows are selected a slice at a time (`run`: filtered and sorted) and the slices' runs
    merged into the page (`page_of`), so a caller can yield between slices."""

    vhost: str | None = None
    name: str | None = None
    use_regex: bool = False
    sort: Sort = "name"
    sort_reverse: bool = False
    page: int | None = None
    page_size: int = 100

    @property
    def pattern(self) -> tuple[Kind, str] | None:
        """`name` as a pattern to match off the event loop, when it is one."""
        return name_pattern(self.name, self.use_regex)

    def run(self, rows: Sequence[Row], passing: Collection[str] = ()) -> Passed:
        """The rows that pass the filters, in the asked order, cut after the last that
        the asked page can hold (the page's rows are among the first `page * page_size`
        of every run), and how many passed. Whole runs of 10,000 queues kept until the
        merge were 20,000 objects for the garbage collector to walk, which holds the event
        loop (docs/benchmarks.md#garbage-collection)."""
        matches = name_matcher(self.name, self.use_regex, passing)
        vhost, sort = self.vhost, self.sort
        kept = [order_of(sort, row) for row in rows
                if (vhost is None or row.key[0] == vhost) and matches(row.key[1])]
        kept.sort(reverse=self.sort_reverse)
        passed = len(kept)
        if self.page is not None:
            del kept[self.page * self.page_size:]
        return kept, passed

    def page_of(self, runs: list[Passed]) -> tuple[list[Row], int]:
        """The asked page of the merged runs (every row without `page`) and how many rows
        passed the filters; a page after the last is refused as RabbitMQ refuses it,
        except page 1 of nothing."""
        filtered = sum(passed for _, passed in runs)
        merged = heapq.merge(*(run for run, _ in runs), reverse=self.sort_reverse)
        if self.page is None:
            return [placed[-1] for placed in merged], filtered
        count = page_count(filtered, self.page_size)
        if self.page > max(count, 1):
            raise BadSelection("page", f"page={self.page} is out of range: "
                                       f"{filtered} queues make {count} pages of "
                                       f"{self.page_size}")
        start = (self.page - 1) * self.page_size
        page = itertools.islice(merged, start, start + self.page_size)
        return [placed[-1] for placed in page], filtered


def page_count(items: int, page_size: int) -> int:
    """Pages of `page_size` that `items` fill (0 for none)."""
    return -(-items // page_size)


def paged(selection: Selection, items: int, filtered: int, total: int) -> dict[str, int]:
    """RabbitMQ's paged answer without its `items`: where one page of `items` queues
    stands among the `filtered` that passed the filters, of `total`."""
    assert selection.page is not None
    return {"page": selection.page, "page_size": selection.page_size,
            "page_count": page_count(filtered, selection.page_size),
            "item_count": items, "filtered_count": filtered, "total_count": total}
