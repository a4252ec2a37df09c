"""When Python's garbage collector runs in the sidecar, and over what.

A collection holds the GIL, so `/flow` waits for it, for as long as it walks the objects
of the generations it collects. Two choices keep those walks short at 10,000 queues:

- `collect_less_often`, at the process's start: `GC_THRESHOLDS` instead of Python's
  (700, 10, 10), so that the young objects a poll makes mostly die before a collection
  sees them: a young collection every few seconds, a middle one every minute or two, and
  none of the full ones after the start in 5-minute soaks (Python's ran one about every poll).
- `settle_long_lived`, after the first poll: what lives then (modules, the app, every
  queue's entry) is left out of all later collections (`gc.freeze`).

Collecting at a moment of the sidecar's choosing instead (after each poll, when the
poll's figures are gone, with Python's automatic collections for bursts only) was tried
on 2026-11-27: in 5-minute soaks it left as many `/flow` answers over 50 ms (7 and 10,
against 6), since what a collection walks then is still the parked long polls and the
figures that live on (docs/benchmarks.md, "Soak"). Fewer young collections before a
middle one, (20,000, 3, 100), was tried the same day: middle collections took 12-55 ms
instead of 86-96 ms, but a 20-minute soak had as many `/flow` answers over 50 ms (29,
against 25 and 33), and the full collections, which no 20-minute soak runs, would come
about every 45 minutes instead of every two hours or more.
"""

from __future__ import annotations

import gc

# allocations before a young collection, young collections before a middle one, middle
# ones before a full one may run (Python's defaults: 700, 10, 10)
GC_THRESHOLDS = (20_000, 20, 100)
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
    ran about every poll (57 in 70 s), which put `/flow`'s p99 at 21 ms. With
    `GC_THRESHOLDS`: p99 11-12 ms, the sidecar's CPU 4-5 % of a core less (2026-11-26,
    10,000 queues, a dashboard open).

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
