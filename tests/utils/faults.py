"""Instruments for fault tests against several flow-sidecar replicas: producers that
long-poll `/flow` and move to another replica when theirs stops answering, writes that
do the same, and the figures a fault leaves behind."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

import requests

from tests.utils.paths import flow_path, queue_path
from tests.utils.sidecar_process import SidecarProcess


@dataclass(frozen=True)
class Answer:
    """One answer a producer got."""

    at: float  # time.monotonic()
    replica: int
    stopped: bool
    count: int
    stale: bool


class Producer(threading.Thread):
    """Long-polls one queue through `replicas[first]`, moving to the next replica when its
    own refuses or drops the connection (as a producer behind a Service would)."""

    def __init__(self, replicas: list[SidecarProcess], queue: str, first: int = 0) -> None:
        super().__init__(daemon=True, name=f"producer {queue}")
        self.replicas = replicas
        self.queue = queue
        self.current = first
        self.answers: list[Answer] = []
        self.switches: list[float] = []  # when it had to move to another replica
        self.errors = 0
        self._stop_event = threading.Event()
        self.http = requests.Session()

    def run(self) -> None:
        version: int | None = None
        while not self._stop_event.is_set():
            replica = self.replicas[self.current]
            params: dict[str, Any] = {"wait": 1}
            if version is not None:
                params["since"] = version
            try:
                r = self.http.get(replica.url + flow_path(self.queue), params=params,
                                  timeout=5)
                body = r.json()
            except (requests.RequestException, ValueError):
                self.errors += 1
                self.switches.append(time.monotonic())
                self.current = (self.current + 1) % len(self.replicas)
                version = None  # versions belong to a replica
                time.sleep(0.05)
                continue
            if r.status_code != 200:
                self.errors += 1
                time.sleep(0.1)
                continue
            version = body["version"]
            self.answers.append(Answer(time.monotonic(), self.current, body["flowStopped"],
                                       body["flowStoppedCount"], body["stale"]))

    def finish(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def flips(self, expected_stopped: bool) -> list[Answer]:
        """Answers that told producers the opposite of what the queue's depth says."""
        return [a for a in self.answers if a.stopped != expected_stopped]

    def longest_silence(self, since: float) -> float:
        """The longest this producer went without an answer from `since` on: how long,
        at worst, /flow did not answer it (a long-poll answers at least every second)."""
        times = [since, *(a.at for a in self.answers if a.at > since)]
        return max(later - earlier for earlier, later in itertools.pairwise(times))


def write_anywhere(replicas: list[SidecarProcess], method: str, path: str,
                   body: Any = None, timeout: float = 30.0) -> tuple[requests.Response, int]:
    """A write through the first replica that takes it: refused connections move to the
    next replica, 503 (nothing changed) is retried. Returns the answer and how many tries
    did not take."""
    deadline = time.monotonic() + timeout
    failed = 0
    index = 0
    while True:
        replica = replicas[index % len(replicas)]
        try:
            r = replica.http.request(method, replica.url + path, json=body, timeout=10)
            if r.status_code != 503:
                return r, failed
        except requests.RequestException:
            index += 1
        failed += 1
        if time.monotonic() > deadline:
            raise AssertionError(f"{method} {path} not taken within {timeout}s")
        time.sleep(0.2)


def settings_of(replica: SidecarProcess, queue: str) -> dict[str, int] | None:
    """The settings a replica serves for a queue (None: none stored)."""
    r = replica.get(queue_path(queue))
    if r.status_code == 404:
        return None
    stored = r.json().get("settings")
    return None if stored is None else {k: v for k, v in stored.items() if v is not None}
