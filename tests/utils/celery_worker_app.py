"""The Celery app a real worker runs in tests/integration/test_celery.py: its own queue is
FLOW_TEST_CELERY_QUEUE, flow control installed with one call, tasks that send sub-tasks."""

from __future__ import annotations

import os
import time

import requests
from celery import Celery

from flow_sidecar_client.celery import install
from tests.utils.paths import flow_path

OWN_QUEUE = os.environ["FLOW_TEST_CELERY_QUEUE"]
app = Celery("flow-test-worker", broker=os.environ["FLOW_TEST_CELERY_BROKER"],
             backend="rpc://")
app.conf.update(task_default_queue=OWN_QUEUE, worker_prefetch_multiplier=1,
                broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)
install(app, timeout=20)  # the sidecar: FLOW_SIDECAR_URL


@app.task(name="flow_test.noop")
def noop() -> None:
    """A sub-task: nothing to do."""


@app.task(name="flow_test.send_to")
def send_to(queue: str, wait_stopped: bool = False) -> float:
    """Send a noop to `queue` (after the sidecar says it is stopped, if asked); the
    seconds the send took."""
    if wait_stopped:
        url = os.environ["FLOW_SIDECAR_URL"] + flow_path(queue)
        deadline = time.monotonic() + 15
        while not requests.get(url, timeout=5).json()["flowStopped"]:
            assert time.monotonic() < deadline, f"{queue} never stopped"
            time.sleep(0.05)
    started = time.monotonic()
    noop.apply_async(queue=queue)
    return time.monotonic() - started
