"""Name patterns (`name=` regular expressions and globs) compiled and matched in a child
process, so no caller's pattern holds the event loop or the GIL (docs/security.md).

A thread would not do: matching 10,000 names in one holds the GIL between RE2 calls, and
each I/O of the event loop then waits up to the 5 ms switch interval for it (an echo's
p99 went from 0.8 to 3.6-5.7 ms). The child matches within the budget of
`sidecar.name_patterns` and answers the indexes that passed; one that does not answer
within the budget and a grace is killed and started again at the next pattern. Requests
take turns (one child: a core is left for the event loop); at most MAX_WAITING wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from sidecar.name_patterns import (
    BUDGET,
    Kind,
    PatternError,
    encoded,
    matching,
    over_budget,
    pattern_test,
)

GRACE = 0.3  # seconds past the budget before a silent child is taken for stuck
STARTUP = 1.0  # seconds more for a child just started (it starts in about 0.1 s)
MAX_WAITING = 8  # patterns waiting their turn; more are a 503
HEADER = struct.Struct("!I")


class FilterBusy(RuntimeError):
    """Too many name patterns are waiting: the answer is 503, retry."""


class NameFilterWorker:
    """The child process and its turns; started at the first pattern, ended by `close`."""

    def __init__(self, budget: float = BUDGET) -> None:
        self.budget = budget
        self._child: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()
        self._waiting = 0

    async def passing(self, kind: Kind, pattern: str, names: Sequence[str],
                      field: str = "name") -> set[str]:
        """The names that pass `pattern`; PatternError (a 400 naming `field`) when it is
        refused or over the budget, FilterBusy when too many patterns wait."""
        if self._waiting >= MAX_WAITING:
            raise FilterBusy(f"{self._waiting} name patterns are waiting; retry")
        self._waiting += 1
        try:
            async with self._turn:
                answer = await self._ask((kind, pattern, field, self.budget, list(names)))
        finally:
            self._waiting -= 1
        if answer[0] == "refused":
            raise PatternError(field, answer[1])
        return {names[i] for i in answer[1]}

    async def _ask(self, request: tuple[Any, ...]) -> tuple[str, Any]:
        child, wait = self._child, self.budget + GRACE
        if child is None or child.returncode is not None:
            child = self._child = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "api.name_filter_worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            wait += STARTUP
        assert child.stdin is not None and child.stdout is not None
        body = pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
        try:
            child.stdin.write(HEADER.pack(len(body)) + body)
            async with asyncio.timeout(wait):
                await child.stdin.drain()
                size, = HEADER.unpack(await child.stdout.readexactly(HEADER.size))
                answer: tuple[str, Any] = pickle.loads(await child.stdout.readexactly(size))
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            await self.close()
            _, pattern, field, budget, names = request
            raise over_budget(field, pattern, len(names), budget) from None
        return answer

    async def close(self) -> None:
        """End the child (it also ends by itself when the sidecar's end of its pipe
        closes)."""
        child, self._child = self._child, None
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()


def answer(request: tuple[Any, ...]) -> tuple[str, Any]:
    """One request in the child: the indexes of the names that pass, or why none are."""
    kind, pattern, field, budget, names = request
    try:
        test = pattern_test(kind, pattern, field)
        return "passed", matching(test, [encoded(n) for n in names], time.monotonic,
                                  field=field, pattern=pattern, budget=budget)
    except PatternError as exc:
        return "refused", exc.message


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """The child's loop: a request from the sidecar, its answer, until the pipe closes."""
    while len(header := requests.read(HEADER.size)) == HEADER.size:
        size, = HEADER.unpack(header)
        body = pickle.dumps(answer(pickle.loads(requests.read(size))),
                            pickle.HIGHEST_PROTOCOL)
        answers.write(HEADER.pack(len(body)) + body)
        answers.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
