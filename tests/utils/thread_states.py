"""Where a server's main thread was while a bench's request waited (on a CPU, waiting for
one, or asleep), and who had the CPUs meanwhile.

A `/flow` answer over 50 ms on a machine of two cores has three possible causes, and only
the kernel can tell them apart afterwards:

- the server's thread ran the whole time (its own work: a loop turn, a garbage collection);
- it was runnable but no core was free (the machine: other processes, a host's steal);
- it slept on a futex (in CPython the GIL, held by another of its threads) while a request
  waited.

`ThreadStates` samples, from a process of its own every `step` seconds, each watched
thread's `/proc/PID/task/PID/schedstat` (nanoseconds on a CPU, nanoseconds runnable on a
run queue: both since the thread began) and its `wchan` (what it sleeps in), the CPU time
of whole processes (`ProcessCpu`, to a tick), and the machine's idle and stolen time
(`/proc/stat`). `during` splits any interval of the run for one thread; `cpus_during` says
who used the CPUs in it. The probes' own processes are worth watching too: a client that
waited for a core makes a fast answer look slow.
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from tests.utils.bench_targets import TICK, ProcessCpu

CPUS = os.cpu_count() or 1
Thread = tuple[int, int, str]  # (ns on a CPU, ns runnable, wchan) since the thread began
# (monotonic s, each thread's, each process's CPU seconds, the machine's idle and steal ticks)
Sample = tuple[float, tuple[Thread | None, ...], tuple[float, ...], int, int]


@dataclass(frozen=True)
class Split:
    """An interval of a thread's time, in seconds: `cpu` on a CPU, `queued` runnable with no
    CPU, the rest off the CPUs; `futex` the share of that rest's samples asleep in a futex
    (a lock: the GIL). `span` is the interval the samples bracket (a step wider or so)."""

    span: float
    cpu: float
    queued: float
    futex: float

    @property
    def off(self) -> float:
        return max(0.0, self.span - self.cpu - self.queued)

    def cause(self) -> str:
        """The largest part: "ran", "waited for a CPU" or "slept" (on a lock, or idle)."""
        parts = {"ran": self.cpu, "waited for a CPU": self.queued, "slept": self.off}
        return max(parts, key=parts.__getitem__)

    def __str__(self) -> str:
        return (f"on a CPU {self.cpu * 1000:.0f} ms, waiting for one {self.queued * 1000:.0f}"
                f" ms, off the CPUs {self.off * 1000:.0f} ms ({self.futex:.0%} of it in a "
                f"futex) over {self.span * 1000:.0f} ms")


def _thread(pid: int) -> Thread | None:
    """The main thread's (ns on a CPU, ns runnable, wchan); None once it is gone."""
    try:
        cpu, queued, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
        wchan = Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
    except (OSError, ValueError):
        return None
    return int(cpu), int(queued), wchan


def _seconds(pid: int) -> float:
    """A whole process's CPU seconds (every thread, to a tick); 0 once it is gone."""
    try:
        return ProcessCpu(pid).seconds()
    except OSError:
        return 0.0


def _machine() -> tuple[int, int]:
    """All CPUs' idle (with I/O wait) and stolen ticks."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[4]) + int(fields[5]), int(fields[8])


def _sample(threads: list[int], processes: list[int], step: float, done: Event,
            results: Connection) -> None:
    """ThreadStates' process: sample everything watched every `step` s until `done`."""
    samples: list[Sample] = []
    while not done.is_set():
        now = time.monotonic()
        samples.append((now, tuple(map(_thread, threads)), tuple(map(_seconds, processes)),
                        *_machine()))
        time.sleep(max(0.0, step - (time.monotonic() - now)))
    results.send(samples)


class ThreadStates:
    """Samples the main threads of `threads` and the CPU time of `processes` (by name) from
    a process of its own: `start`, then `done.set()` and `join`, then `during` and
    `cpus_during` for any interval of the run."""

    def __init__(self, threads: list[int], processes: dict[str, int],
                 step: float = 0.01) -> None:
        context = multiprocessing.get_context("fork")
        self.done = context.Event()
        self._results, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=_sample, daemon=True, args=(
            threads, list(processes.values()), step, self.done, sending))
        self._threads = threads
        self._names = list(processes)
        self._samples: list[Sample] = []
        self._times: list[float] = []

    def start(self) -> None:
        self._process.start()

    @property
    def pid(self) -> int:
        """The sampler's process, once started (a bench may give it a cgroup)."""
        return self._process.pid or 0

    def join(self) -> None:
        """Wait for the sampler (after `done.set()`) and take its samples."""
        self._samples = self._results.recv()
        self._times = [sample[0] for sample in self._samples]
        self._process.join()

    def _bracket(self, began: float, ended: float) -> tuple[int, int] | None:
        """The indices of the last sample at or before `began` and the first at or after
        `ended`; None when the samples do not reach that far."""
        first = bisect.bisect_right(self._times, began) - 1
        last = bisect.bisect_left(self._times, ended)
        if first < 0 or last >= len(self._samples) or last <= first:
            return None
        return first, last

    def during(self, thread: int, began: float, ended: float) -> Split | None:
        """One watched thread's time over the samples that bracket the interval; None when
        none do, or the thread was not there."""
        bracket = self._bracket(began, ended)
        if bracket is None or thread not in self._threads:
            return None
        at = self._threads.index(thread)
        states = [sample[1][at] for sample in self._samples[bracket[0]:bracket[1] + 1]]
        start, end = states[0], states[-1]
        if start is None or end is None:
            return None
        asleep = [state[2] for state in states[1:] if state and state[2] not in ("0", "")]
        futex = sum("futex" in wchan for wchan in asleep) / len(asleep) if asleep else 0.0
        span = self._times[bracket[1]] - self._times[bracket[0]]
        return Split(span, (end[0] - start[0]) / 1e9, (end[1] - start[1]) / 1e9, futex)

    def cpus_during(self, began: float, ended: float) -> dict[str, float] | None:
        """Seconds of CPU each watched process used over the samples that bracket the
        interval (to a tick), the machine's stolen and idle seconds, and what is left of
        every CPU's time ("others": the rest of the machine)."""
        bracket = self._bracket(began, ended)
        if bracket is None:
            return None
        (t0, _, cpu0, idle0, steal0), (t1, _, cpu1, idle1, steal1) = (
            self._samples[bracket[0]], self._samples[bracket[1]])
        used = {name: b - a for name, a, b in zip(self._names, cpu0, cpu1, strict=True)}
        used["steal"], used["idle"] = (steal1 - steal0) / TICK, (idle1 - idle0) / TICK
        used["others"] = max(0.0, (t1 - t0) * CPUS - sum(used.values()))
        return used
