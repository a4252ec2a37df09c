"""The child process that matches name patterns (api.name_filter_worker): answers, refusals,
a spent budget, and a child that does not answer is ended and replaced."""

from __future__ import annotations

import asyncio
import sys

import pytest

from api.name_filter_worker import NameFilterWorker
from sidecar.name_patterns import PatternError

pytestmark = pytest.mark.anyio
NAMES = ["orders.eu", "Orders.US", "payments"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_patterns_are_matched_and_refused_in_the_child() -> None:
    worker = NameFilterWorker()
    try:
        assert await worker.passing("regex", "^orders", NAMES) == {"orders.eu", "Orders.US"}
        assert await worker.passing("glob", "orders.*", NAMES) == {"orders.eu"}
        with pytest.raises(PatternError, match=r"^name='\(a\)\\\\1' is not a regular"):
            await worker.passing("regex", "(a)\\1", NAMES)
    finally:
        await worker.close()


async def test_a_spent_budget_is_a_refusal_naming_the_field() -> None:
    worker = NameFilterWorker(budget=-1.0)
    try:
        with pytest.raises(PatternError, match="^queue='o' takes over -1 s") as refused:
            await worker.passing("regex", "o", NAMES, field="queue")
        assert refused.value.field == "queue"
    finally:
        await worker.close()


async def test_a_child_that_does_not_answer_is_ended_and_replaced() -> None:
    worker = NameFilterWorker(budget=0.1)
    stuck = await asyncio.create_subprocess_exec(  # reads nothing, answers nothing
        sys.executable, "-c", "import time; time.sleep(60)",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    worker._child = stuck
    try:
        with pytest.raises(PatternError, match="takes over 0.1 s"):
            await worker.passing("regex", "o", NAMES)
        assert stuck.returncode is not None  # ended
        assert await worker.passing("regex", "pay", NAMES) == {"payments"}
    finally:
        await worker.close()
