"""Connection and body limits of a real `flow-sidecar` process, over real sockets on
loopback: idle and slow clients are cut, parked long-polls and streams are not, the
connection cap answers 503, large bodies are refused at once without stalling `/flow`,
and aborted uploads cost one log line, not a traceback each."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.conftest import Broker
from tests.utils.flow import flow, known
from tests.utils.sidecar_process import SidecarProcess, eventually

Names = Callable[[str], str]
FAST_LIMITS = {"FLOW_HEADER_TIMEOUT": "1", "FLOW_BODY_TIMEOUT": "1",
               "FLOW_POLL_INTERVAL": "0.2"}


def connect(sidecar: SidecarProcess, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", sidecar.port), timeout=10)
    if first:
        sock.sendall(first)
    return sock


def closed(sock: socket.socket) -> bytes | None:
    """What the server sent before closing `sock`, or None while it is still open."""
    sock.settimeout(0.01)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, BlockingIOError):
        return None
    except ConnectionResetError:
        pass
    return data


def rss_mb(sidecar: SidecarProcess) -> float:
    assert sidecar.proc is not None
    for line in Path(f"/proc/{sidecar.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_idle_and_slow_clients_are_cut_long_polls_and_streams_are_not(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names) -> None:
    sidecar = sidecar_factory(env=FAST_LIMITS).start()
    q = known(sidecar, broker.declare(qname("limits")))
    version = flow(sidecar, q)["version"]
    idle = [connect(sidecar) for _ in range(3)]
    slowloris = [connect(sidecar, b"GET /flow/" + q.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                 for _ in range(3)]
    slow_body = [connect(sidecar, b"PUT /queues/%2F/" + q.encode() + b"/flow HTTP/1.1\r\n"
                         b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{") for _ in range(2)]
    long_poll = connect(sidecar, f"GET /flow/{q}?since={version}&wait=5 HTTP/1.1\r\n"
                                 "Host: 127.0.0.1\r\n\r\n".encode())
    stream = connect(sidecar, b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    started = time.monotonic()

    cut: dict[int, bytes] = {}
    while time.monotonic() - started < 4 and len(cut) < 8:
        for i, sock in enumerate(idle + slowloris + slow_body):
            if i in cut:
                continue
            if sock in slowloris:
                try:
                    sock.sendall(b"X")  # a header byte now and then
                except OSError:
                    pass
            answer = closed(sock)
            if answer is not None:
                cut[i] = answer
        time.sleep(0.25)
    assert len(cut) == 8, f"still open after 4 s: {8 - len(cut)} of 8"
    assert [cut[i] for i in range(3)] == [b""] * 3, "idle connections just close"
    assert all(cut[i].startswith(b"HTTP/1.1 408") for i in range(3, 8)), cut
    assert flow(sidecar, q)["version"] == version, "nothing was written"

    assert closed(stream) is None, "an SSE stream outlives the header and body timeouts"
    long_poll.settimeout(10)
    answer = long_poll.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert time.monotonic() - started > 4.5, "the long-poll waited its full 5 s"
    assert closed(stream) is None
    for sock in [*idle, *slowloris, *slow_body, long_poll, stream]:
        sock.close()
    lines = [line for line in sidecar.log().splitlines() if "closed a connection" in line]
    assert 1 <= len(lines) <= 2, lines  # one line per kind (408 here), not one per client


def test_endless_headers_are_refused_with_431(
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory().start(wait_ready=False)
    eventually(lambda: sidecar.get("/healthz").ok)
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    sock = connect(sidecar, start)
    pads = [b"X-Pad: " + b"p" * 4000 + b"\r\n"] * 16
    # the last pad takes the headers just past 65536 bytes (never an empty line): the
    # sidecar has read all we sent when it refuses, so it answers without a reset
    over = 65536 + 1 - len(start) - sum(map(len, pads))
    pads.append(b"X-Pad: " + b"p" * (over - len(b"X-Pad: \r\n")) + b"\r\n")
    for pad in pads:
        sock.sendall(pad)
    sock.settimeout(5)
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431"), answer
    assert "sent more than 65536 bytes of headers" in sidecar.log()
    assert sidecar.get("/healthz").ok


def test_complete_headers_over_the_cap_in_one_write_are_refused_with_431(
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory().start(wait_ready=False)
    eventually(lambda: sidecar.get("/healthz").ok)
    request = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               + b"X-Pad: " + b"p" * 71_800 + b"\r\n\r\n")  # 71,8xx bytes, ended
    sock = connect(sidecar, request)
    sock.settimeout(5)
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert sidecar.get("/healthz").ok


def test_connections_beyond_the_cap_are_answered_503(
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory(env={"FLOW_MAX_CONNECTIONS": "6"}).start(wait_ready=False)
    eventually(lambda: sidecar.get("/healthz").ok)
    held = [connect(sidecar) for _ in range(6)]
    time.sleep(0.2)
    for _ in range(10):
        over = connect(sidecar, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        over.settimeout(5)
        assert over.recv(65536).startswith(b"HTTP/1.1 503")
        over.close()
    for sock in held:
        sock.close()
    eventually(lambda: sidecar.get("/healthz").ok)
    lines = [line for line in sidecar.log().splitlines() if "concurrency limit" in line]
    assert len(lines) == 1, lines  # one line, not one per refused request


def test_aborted_uploads_are_one_warning_line(
        sidecar_factory: Callable[..., SidecarProcess]) -> None:
    sidecar = sidecar_factory().start(wait_ready=False)
    eventually(lambda: sidecar.get("/healthz").ok)
    for _ in range(20):
        sock = connect(sidecar, b"PUT /queues/%2F/aborted/flow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 50000\r\n"
                                b"\r\n" + b'{"pad": "' + b"x" * 1000)
        sock.close()
    time.sleep(1)
    assert sidecar.get("/healthz").ok
    log = sidecar.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
    warned = [line for line in log.splitlines() if "went away" in line]
    assert len(warned) == 1 and " WARNING " in warned[0], warned
    assert sidecar.get("/queues").json() == [] or all(
        q["queue"] != "aborted" for q in sidecar.get("/queues").json())


def test_large_bodies_are_refused_at_once_and_flow_stays_fast(
        broker: Broker, sidecar_factory: Callable[..., SidecarProcess], qname: Names) -> None:
    sidecar = sidecar_factory("--poll-interval", "0.2").start()
    q = known(sidecar, broker.declare(qname("large")))
    body = ("{" + ",".join(f'"k{i}":1' for i in range(900_000)) + "}").encode()
    before = rss_mb(sidecar)
    refused = 0  # answers read and checked (a reset may come before any is read)
    for _ in range(3):
        started = time.monotonic()
        sock = connect(sidecar, f"PUT /queues/%2F/{q}/flow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                f"Content-Type: application/json\r\nContent-Length: {len(body)}"
                                "\r\n\r\n".encode())
        try:
            sock.sendall(body)
        except OSError:
            pass  # the answer came first and the sidecar closed: that is the point
        sock.settimeout(5)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        sock.close()
        assert time.monotonic() - started < 3
        if answer:
            head, _, text = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 413"), head
            assert "--max-body-bytes" in json.loads(text)["detail"]
            refused += 1
        started = time.monotonic()
        assert flow(sidecar, q)["queue"] == q
        assert time.monotonic() - started < 0.5
    assert refused >= 1, "every upload was reset before its answer was read: the 413 " \
                         "and its --max-body-bytes detail were never checked"
    assert rss_mb(sidecar) - before < 30, (before, rss_mb(sidecar))
    assert sidecar.get(f"/queues/%2F/{q}").json()["settings"]["qpid.flow_stop_count"] is None
