"""When Python's garbage collector runs in the sidecar, and over what.

A collection holds the GIL, so `/flow` waits for it, for as long as it walks the objects
of the generations it collects. At 10,000 queues almost everything a collection walks is
alive (the figures of a poll, the parked long polls with their connections): the walks
free nothing and only cost. Two choices keep them short:

- `collect_less_often`, at the process's start: `GC_THRESHOLDS` instead of Python's
  (700, 10, 10), which ran a full collection about every poll. Each number bounds one
  walk: a young collection walks at most about the first number of objects (2,000), a
  middle one what survived the last ten young ones (at most about 20,000), and the full
  one, which walks everything not frozen (69-115 ms at 10,000 queues with 1,000 long
  polls), waits for 2,000 middle ones: about every 100 minutes under that load, as often
  as before (Python also skips it until a quarter more objects than at the last one have
  reached the oldest generation).
- `settle_long_lived`, after the first poll: what lives then (modules, the app, every
  queue's entry) is left out of all later collections (`gc.freeze`).

The schedule before, (20,000, 20, 100), ran fewer, longer walks: young ones of 10-68 ms
and middle ones of 46-113 ms under the soak's load, which were most of the `/flow` answers
over 50 ms in a 20-minute soak (25 and 33; 7, 8 and 11 with this schedule, 2026-11-27,
with floors of 2, 6 and 8 beside them: docs/benchmarks.md, "Soak"). Collecting at a
moment of the sidecar's choosing instead (after each poll, when the poll's figures are
gone) was tried on 2026-11-27 and left as many slow answers, since what a collection
walks then is still what lives on.
"""

from __future__ import annotations

import gc

# allocations before a young collection, young collections before a middle one, middle
# ones before a full one may run (Python's defaults: 700, 10, 10)
GC_THRESHOLDS = (2_000, 10, 2_000)
_settled = False  # settle_long_lived has run in this process


def collect_less_often() -> None:
    """At the process's start: `GC_THRESHOLDS` already for the first poll, which builds
    every queue's entry. With Python's own, the first poll of 10,000 queues ran full
    collections of 55-123 ms as the heap grew (three in a second, 2026-11-27)."""
    gc.set_threshold(*GC_THRESHOLDS)


def settle_long_lived() -> None:
    """After the process's first poll: leave what lives now out of all later garbage
    collections (`gc.freeze`), and collect less often. A full collection walks every
    object the collector tracks: at 10,000 queues that held `/flow` for 130-250 ms every
    few polls; walking only what came since took 13-17 ms at first, but 20-70 ms once
    the polls had replaced the queues' figures, and with Python's default thresholds it
    ran about every poll (57 in 70 s), which put `/flow`'s p99 at 21 ms. With thresholds
    of (20,000, 20, 100): p99 11-12 ms, the sidecar's CPU 4-5 % of a core less
    (2026-11-26, 10,000 queues, a dashboard open).

    No collection first: at 10,000 queues it walked the first poll's objects for
    114 ms, to free the few hundred objects in reference cycles that starting up leaves,
    which stay frozen instead. What is frozen is still freed when nothing refers to it;
    only reference cycles among it stay. Once a process: later pollers (tests) change
    nothing."""
    global _settled
    if not _settled:
        _settled = True
        gc.freeze()
        collect_less_often()  # also where `main` did not run first (tests)
