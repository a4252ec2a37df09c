"""Requests per second of `GET /flow/{queue}`, against baselines measured in the same run.

    .venv/bin/python bench/flow_requests.py [--seconds 5] [--connections 50]

Baselines, each served on this machine right now under the same load generator (wrk):
- a naive FastAPI route: path params, a dict lookup, a pydantic response model, run by
  the same uvicorn (what "a naive FastAPI route" means in the developers' guide);
- RabbitMQ's own management API for one queue (`/api/queues/%2F/{queue}`).
The sidecar runs as a real `flow-sidecar` process against the real broker. Needs `wrk`
(Debian package) and the broker from deploy/ensure-rabbitmq.sh. Prints ratios; asserts
nothing: speed is measured here, never in unit tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pika
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.utils.sidecar_process import SidecarProcess, eventually, free_port  # noqa: E402

QUEUE = "bench-flow"
NAIVE_APP = textwrap.dedent('''
    from fastapi import FastAPI
    from pydantic import BaseModel

    class Depth(BaseModel):
        messages: int
        bytes: int

    class Flow(BaseModel):
        vhost: str
        queue: str
        flowStopped: bool
        flowStoppedCount: int
        depth: Depth
        thresholds: dict[str, int | None]
        sources: dict[str, str]
        sampledAt: str
        stale: bool
        version: int

    STATE = {("/", "bench-flow"): Flow(
        vhost="/", queue="bench-flow", flowStopped=False, flowStoppedCount=3,
        depth=Depth(messages=120, bytes=4096),
        thresholds={"qpid.flow_stop_count": 900, "qpid.flow_resume_count": 500,
                    "qpid.flow_stop_size": None, "qpid.flow_resume_size": None},
        sources={"count": "api", "size": "none"}, sampledAt="2026-11-22T08:00:00Z",
        stale=False, version=17)}
    app = FastAPI()

    @app.get("/flow/{queue}", response_model=Flow)
    def flow(queue: str) -> Flow:
        return STATE[("/", queue)]
''')


def wrk(url: str, seconds: int, connections: int, auth: str | None = None) -> float:
    """Requests per second that wrk measured (non-2xx answers make the run invalid)."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if auth:
        cmd[1:1] = ["-H", f"Authorization: Basic {auth}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"{url} answered errors under load:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk: apt-get install -y wrk")

    channel = pika.BlockingConnection().channel()
    channel.queue_declare(QUEUE, arguments={"qpid.flow_stop_count": 900,
                                            "qpid.flow_resume_count": 500})
    work = Path(tempfile.mkdtemp(prefix="bench-flow-"))
    (work / "naive_app.py").write_text(NAIVE_APP)
    port = free_port()
    naive = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "naive_app:app", "--port", str(port),
         "--log-level", "warning", "--no-access-log"], cwd=work, env={**os.environ})
    sidecar = SidecarProcess(work / "sidecar").start()
    try:
        eventually(lambda: requests.get(f"http://127.0.0.1:{port}/flow/{QUEUE}").ok)
        eventually(lambda: sidecar.get(f"/flow/{QUEUE}").ok)
        time.sleep(1)
        results = {
            "naive FastAPI route": wrk(f"http://127.0.0.1:{port}/flow/{QUEUE}",
                                       args.seconds, args.connections),
            "RabbitMQ management API, one queue": wrk(
                f"http://127.0.0.1:15672/api/queues/%2F/{QUEUE}", args.seconds,
                args.connections, auth="Z3Vlc3Q6Z3Vlc3Q="),
            "flow-sidecar GET /flow/{queue}": wrk(f"{sidecar.url}/flow/{QUEUE}",
                                                  args.seconds, args.connections),
            "flow-sidecar GET /flow/{vhost}/{queue}": wrk(f"{sidecar.url}/flow/%2F/{QUEUE}",
                                                          args.seconds, args.connections),
        }
    finally:
        sidecar.stop()
        naive.terminate()
        channel.queue_delete(QUEUE)
        channel.connection.close()
    base = results["naive FastAPI route"]
    print(f"{'server':42} {'req/s':>10} {'vs naive':>9}")
    for name, rate in results.items():
        print(f"{name:42} {rate:10.0f} {rate / base:8.2f}x")


if __name__ == "__main__":
    main()
