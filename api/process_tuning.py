"""Process-wide tuning that `main` applies once, before any thread starts: the garbage
collector's thresholds, the GIL's switch interval and malloc's arenas. What each bought is
in docs/benchmarks.md, "Ten thousand queues"."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

# allocations before a young collection, young collections before a middle one, middle
# ones before a full one (Python's: 700, 10, 10, a full walk about every poll at 10,000
# queues, each holding /flow for as long as it walks)
GC_THRESHOLDS = (2_000, 10, 2_000)
# seconds a thread may hold the GIL while the event loop waits for it (Python's: 0.005):
# the poll's and the live sampler's threads otherwise delay /flow by up to that much
GIL_SWITCH_INTERVAL = 0.0005
M_ARENA_MAX = -8  # glibc's mallopt parameter
MALLOC_ARENAS = 2  # as MALLOC_ARENA_MAX=2: a thread's own arena keeps freed memory resident


def tune_process() -> None:
    """Apply the three, as early as possible (the first poll already benefits)."""
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    limit_malloc_arenas()


def limit_malloc_arenas() -> None:
    """At most MALLOC_ARENAS glibc arenas; a C library without mallopt (musl) is left as
    it is."""
    libc = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(libc), "mallopt", None) if libc else None
    if mallopt is not None:
        mallopt(M_ARENA_MAX, MALLOC_ARENAS)
