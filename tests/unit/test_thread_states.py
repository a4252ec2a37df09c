"""tests/utils/thread_states.py, the soak bench's account of a slow answer, on real
processes: one that spins is found on a CPU, one that sleeps off the CPUs, and one that
waits for a lock is found asleep in a futex."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

from tests.utils.thread_states import ThreadStates


def spin(seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def wait_for_a_lock(seconds: float) -> None:
    lock = threading.Lock()
    lock.acquire()
    threading.Timer(seconds, lock.release).start()
    lock.acquire()  # the main thread sleeps in a futex until the timer's thread lets go


def test_a_spinning_a_sleeping_and_a_waiting_process_are_told_apart() -> None:
    context = multiprocessing.get_context("fork")
    spinning = context.Process(target=spin, args=(1.5,))
    sleeping = context.Process(target=time.sleep, args=(1.5,))
    waiting = context.Process(target=wait_for_a_lock, args=(1.5,))
    for process in (spinning, sleeping, waiting):
        process.start()
    pids = [spinning.pid or 0, sleeping.pid or 0, waiting.pid or 0]
    states = ThreadStates(pids, {"spinning": pids[0], "me": os.getpid()}, step=0.01)
    states.start()
    time.sleep(0.3)
    began = time.monotonic()
    time.sleep(0.5)
    ended = time.monotonic()
    time.sleep(0.1)
    states.done.set()
    states.join()
    for process in (spinning, sleeping, waiting):
        process.join()
    spun, slept, waited = (states.during(pid, began, ended) for pid in pids)
    assert spun is not None and spun.cause() in ("ran", "waited for a CPU")
    assert spun.cpu + spun.queued > 0.8 * spun.span
    assert slept is not None and slept.cause() == "slept" and slept.cpu < 0.05
    assert waited is not None and waited.cause() == "slept" and waited.futex > 0.9
    cpus = states.cpus_during(began, ended)
    assert cpus is not None and cpus["spinning"] > 0.3 and cpus["me"] < 0.2
    assert states.during(pids[0], began - 60, ended) is None  # before the first sample
