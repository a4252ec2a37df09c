"""A caller's name pattern cannot hold the sidecar: catastrophic regular expressions and
globs are answered within 1 s (a result, or a 400 naming `name`) while `GET /flow` beside
them stays within 2x of its idle p99, plus what any listing costs it
(docs/security.md#security-and-limits)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.integration.conftest import Broker
from tests.utils.flow import known
from tests.utils.paths import flow_path
from tests.utils.sidecar_process import SidecarProcess

ANSWER_WITHIN = 1.0  # seconds, per pattern
WAIT_AT_MOST = 2.5  # the test's own wait: a stalled sidecar fails the test, not hangs it
PACE = 0.02  # seconds between two patterns: one caller's patterns, one after the other
ROUNDS = 4
# what listings of every queue cost /flow beside them on 2 shared cores, whatever their
# pattern (a few ms, more while the suite's queues fill the broker); a pattern held on the
# event loop costs seconds
SLACK = 0.025


def catastrophic_patterns() -> Iterator[str]:
    """Patterns that backtrack exponentially (or blow up a program) on a name of 31 `a`s
    and a tag: the reported one, nested quantifiers, alternation blow-ups, backreference-
    and look-around-like constructs, nested counted repetition."""
    yield "(.|.){24}#"
    for count in (20, 26, 32):
        yield f"(.|.){{{count}}}#"
    for atom in ("a", "[a-z]", "\\w", "."):
        yield f"({atom}+)+$"
        yield f"({atom}*)*#"
        yield f"(({atom}+)+)+#"
        yield f"({atom}|{atom}{atom})+#"
        yield f"({atom}|{atom}?)+#"
    yield "(.*a){24}#"
    yield "(x+x+)+y|(a+a+)+#"
    yield "(a|a|a|a|a|a)*#"
    yield "(a+)\\1+#"
    yield "(.*)\\1\\1#"
    yield "(?=(a+))\\1#"
    yield "(?P<r>a+)(?P=r)+#"
    yield "(?!(a+)+#)z"
    yield "(((.{0,9}){0,9}){0,9})#"
    yield "(.{0,99}){0,9}#"
    yield "((.{0,9}){0,9})#"
    yield "(?s:" + ".*." * 120 + "#)"


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


PROBE = """
import sys, time, requests
url, until = sys.argv[1], float(sys.argv[2])
http = requests.Session()
while time.monotonic() < until:
    start = time.monotonic()
    try:
        ok = http.get(url, timeout=2.5).status_code == 200
        print(f"{start} {time.monotonic() - start if ok else 'failed'}", flush=True)
    except requests.RequestException as exc:
        print(f"{start} {exc!r}".replace(chr(10), " "), flush=True)
    time.sleep(0.002)
"""


class Prober:
    """`GET /flow` for one queue in a loop, in a process of its own (a thread beside the
    test's requests would measure the test's own GIL), until `seconds` have passed."""

    def __init__(self, sidecar: SidecarProcess, queue: str, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, sidecar.url + flow_path(queue),
             str(time.monotonic() + seconds)], stdout=subprocess.PIPE, text=True)

    def samples(self) -> list[tuple[float, float]]:
        """(when, seconds) of each probe; a failed probe fails the test."""
        out, _ = self.proc.communicate(timeout=30)
        probes = [line.split(" ", 1) for line in out.splitlines()]
        stalls = [p for p in probes if not p[1][0].isdigit()]
        assert not stalls, stalls
        return [(float(when), float(seconds)) for when, seconds in probes]


@pytest.mark.parametrize("kind", ["regex", "glob"])
def test_catastrophic_patterns_are_answered_within_a_second_and_flow_keeps_answering(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess], kind: str) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.5").start()
    queue = known(sidecar, broker.declare("a" * 31 + "-" + uuid.uuid4().hex[:8]))
    assert len(queue) == 40
    if kind == "regex":
        patterns = list(catastrophic_patterns())
        params = [{"name": p, "use_regex": "true"} for p in patterns]
    else:  # a glob of a name's length of `*` and `?`: a regular expression of 510 parts
        patterns = ["*" + "?*" * 127 + "#", "*a" * 127 + "#", "[a-z]*" * 80 + "#", "?" * 255]
        params = [{"name": p} for p in patterns]
    # the matcher's process starts at the first pattern (docs/api.md), before the probes
    assert sidecar.get("/queues", params={"name": "^a", "use_regex": "true"}).ok
    answers: list[tuple[str, int, float]] = []
    windows: list[tuple[float, float]] = []  # attack windows, between idle ones of 1 s
    prober = Prober(sidecar, queue, seconds=ROUNDS * 2.0 + 4.0)
    for _ in range(ROUNDS):  # idle and attack taking turns: both see the machine's load
        time.sleep(1.0)
        attack_from = time.monotonic()
        while not windows or time.monotonic() < attack_from + 1.0:
            for pattern, query in zip(patterns, params, strict=True):
                answers.append(ask(sidecar, pattern, query, prober))
                time.sleep(PACE)
            if len(answers) >= len(patterns) * (len(windows) + 1):
                break
        windows.append((attack_from, time.monotonic()))
    time.sleep(1.0)
    samples = prober.samples()
    idle = [s for when, s in samples
            if not any(a - 0.05 <= when + s and when <= b for a, b in windows)]
    attack = [s for when, s in samples if any(a <= when and when + s <= b for a, b in windows)]
    assert len(idle) >= 200 and len(attack) >= 50, (len(idle), len(attack))
    print(f"/flow p99 idle {p99(idle) * 1e3:.2f} ms, beside {len(patterns)} {kind} "
          f"patterns {p99(attack) * 1e3:.2f} ms; slowest pattern "
          f"{max(a[2] for a in answers):.3f} s; statuses "
          f"{sorted({a[1] for a in answers})}")
    assert p99(attack) <= 2 * p99(idle) + SLACK, (p99(attack), p99(idle), answers)


def ask(sidecar: SidecarProcess, pattern: str, query: dict[str, str],
        prober: Prober) -> tuple[str, int, float]:
    """One listing with `pattern`: answered within ANSWER_WITHIN, 200 or 400 naming `name`."""
    start = time.perf_counter()
    try:
        r = sidecar.http.get(sidecar.url + "/queues", params=query, timeout=WAIT_AT_MOST)
    except requests.Timeout:
        prober.proc.kill()
        pytest.fail(f"{pattern!r} held /queues over {WAIT_AT_MOST} s")
    elapsed = time.perf_counter() - start
    assert r.status_code in (200, 400), (pattern, r.status_code, r.text)
    if r.status_code == 400:
        assert r.json()["detail"].startswith("name="), r.text
    assert elapsed <= ANSWER_WITHIN, (pattern, elapsed)
    return pattern, r.status_code, round(elapsed, 3)
