"""Leaving the sidecar's long-lived objects out of garbage collections, after its first
poll. A collection holds the GIL, so `/flow` waits for it as long as it walks; at 10,000
queues almost everything it would walk lives on. The thresholds are the process's
(`api.process_tuning`); the figures are in docs/benchmarks.md, "Ten thousand queues"."""

from __future__ import annotations

import gc

_settled = False  # settle_long_lived has run in this process


def settle_long_lived() -> None:
    """After the process's first poll: leave what lives now (modules, the app, every
    queue's entry) out of all later collections (`gc.freeze`), without collecting first
    (a walk over the whole first poll). What is frozen is still freed when nothing refers
    to it. Once a process: later pollers (tests) change nothing."""
    global _settled
    if not _settled:
        _settled = True
        gc.freeze()
