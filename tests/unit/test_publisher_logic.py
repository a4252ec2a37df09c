"""The producer library's pure parts: the notice/timeout schedule on an injected clock,
settings resolution, the confirm window, and the flow watcher fed by a fake fetch."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import pytest

from flow_sidecar_client.api import EXIT_UNREACHABLE, ApiError
from flow_sidecar_client.confirms import ConfirmWindow, MessageNacked, MessageReturned, Returned
from flow_sidecar_client.flow_wait import FlowWait, WaitSettings
from flow_sidecar_client.flowwatch import (
    FlowWatcher,
    exchange_flow_path,
    queue_flow_path,
)
from flow_sidecar_client.publisher import default_producer_id
from flow_sidecar_client.watch_state import Signal


def notices_until(wait: FlowWait, end_ms: int) -> list[tuple[int, str]]:
    """Drive the schedule like a publisher that looks every millisecond; (ms, notice)."""
    seen = []
    for ms in range(end_ms):
        now = wait.started + ms / 1000
        if wait.expired(now):
            break
        seen += [(ms, notice) for notice in wait.notices(now)]
    return seen


def test_notices_every_period_then_timeout() -> None:
    wait = FlowWait(WaitSettings(200, 1000), started=50.0)
    assert notices_until(wait, end_ms=10_000) == [
        (200, "Message send delayed by 0.2s due to broker enforced flow control"),
        (400, "Message send delayed by 0.4s due to broker enforced flow control"),
        (600, "Message send delayed by 0.6s due to broker enforced flow control"),
        (800, "Message send delayed by 0.8s due to broker enforced flow control"),
    ]
    assert not wait.expired(50.999)
    assert wait.expired(51.0)


def test_qpid_defaults_read_like_the_java_client() -> None:
    wait = FlowWait(WaitSettings(), started=0.0)
    assert wait.notices(10.0) == [
        "Message send delayed by 5s due to broker enforced flow control",
        "Message send delayed by 10s due to broker enforced flow control"]
    assert wait.next_event() == 15.0
    assert not wait.expired(119.9) and wait.expired(120.0)


def test_a_late_caller_catches_up_but_never_notices_at_or_after_the_timeout() -> None:
    wait = FlowWait(WaitSettings(300, 1000), started=0.0)
    assert [n.split()[4] for n in wait.notices(0.65)] == ["0.3s", "0.6s"]
    assert wait.next_event() == pytest.approx(0.9)
    assert [n.split()[4] for n in wait.notices(5.0)] == ["0.9s"]
    assert wait.next_event() == 1.0


def test_failure_zero_gives_up_at_once_without_notices() -> None:
    wait = FlowWait(WaitSettings(200, 0), started=3.0)
    assert wait.expired(3.0)
    assert wait.notices(3.0) == []


@pytest.mark.parametrize(("code", "env", "expected"), [
    ((None, None), {}, WaitSettings(5000, 120000)),
    ((None, None), {"FLOW_CONTROL_WAIT_NOTIFY_PERIOD": "200",
                    "FLOW_CONTROL_WAIT_FAILURE": "1000"}, WaitSettings(200, 1000)),
    ((300, 0), {"FLOW_CONTROL_WAIT_NOTIFY_PERIOD": "200",
                "FLOW_CONTROL_WAIT_FAILURE": "1000"}, WaitSettings(300, 0)),
])
def test_settings_code_beats_environment_beats_defaults(
        code: tuple[int | None, int | None], env: dict[str, str],
        expected: WaitSettings) -> None:
    assert WaitSettings.resolve(*code, environ=env) == expected


@pytest.mark.parametrize(("code", "env", "message"), [
    ((None, None), {"FLOW_CONTROL_WAIT_FAILURE": "2s"},
     "FLOW_CONTROL_WAIT_FAILURE='2s' is not a whole number of milliseconds"),
    ((0, None), {}, "flow_control_wait_notify_period must be at least 1 ms, not 0"),
    ((None, -1), {}, "flow_control_wait_failure must be at least 0 ms, not -1"),
])
def test_bad_settings_are_refused_by_name(code: tuple[int | None, int | None],
                                          env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WaitSettings.resolve(*code, environ=env)


def test_window_counts_unconfirmed_messages_up_to_capacity() -> None:
    window = ConfirmWindow(3)
    assert [window.sent() for _ in range(3)] == [1, 2, 3]
    assert window.full
    window.on_confirm(2, multiple=False, ack=True)
    assert window.unconfirmed == {1, 3} and not window.full
    window.sent()
    window.on_confirm(3, multiple=True, ack=True)
    assert window.unconfirmed == {4}
    assert window.take_error() is None


def test_nacks_and_returns_become_one_clear_error_once() -> None:
    window = ConfirmWindow(10)
    for _ in range(4):
        window.sent()
    window.on_return(Returned(312, "NO_ROUTE", "", "missing"))
    window.on_confirm(1, multiple=False, ack=True)
    window.on_confirm(3, multiple=True, ack=False)
    error = window.take_error()
    assert isinstance(error, MessageNacked)
    assert "nacked 2 message(s) (delivery tags 2, 3)" in str(error)
    assert "312 NO_ROUTE" in str(error) and "'missing'" in str(error)
    assert window.take_error() is None

    window.on_return(Returned(312, "NO_ROUTE", "ex", "k"))
    window.on_confirm(4, multiple=False, ack=True)
    returned = window.take_error()
    assert isinstance(returned, MessageReturned)
    assert "exchange 'ex' with routing key 'k'" in str(returned)


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        ConfirmWindow(0)


def test_paths_are_percent_encoded_and_the_default_exchange_is_named() -> None:
    assert queue_flow_path("/", "a/b c") == "/flow/%2F/a%2Fb%20c"
    assert exchange_flow_path("/", "") == "/flow/exchange/%2F/amq.default"
    assert exchange_flow_path("v h", "x/y") == "/flow/exchange/v%20h/x%2Fy"


def test_producer_ids_are_unique_and_name_the_process() -> None:
    first, second = default_producer_id(), default_producer_id()
    prefix = f"{socket.gethostname()}-{os.getpid()}-"
    assert first.startswith(prefix) and second.startswith(prefix)
    assert int(second.removeprefix(prefix)) == int(first.removeprefix(prefix)) + 1


class ScriptedSidecar:
    """A Fetch that plays a script of answers (dicts) and failures (ApiError)."""

    def __init__(self, *script: dict[str, Any] | ApiError) -> None:
        self.script = list(script)
        self.calls: list[tuple[int | None, float | None]] = []

    def __call__(self, since: int | None, wait: float | None) -> dict[str, Any]:
        self.calls.append((since, wait))
        step = self.script.pop(0)
        if isinstance(step, ApiError):
            raise step
        return step


def test_watcher_follows_versions_and_warns_once_per_outage(
        caplog: pytest.LogCaptureFixture) -> None:
    down = ApiError("cannot reach flow-sidecar at http://127.0.0.1:1: ConnectionError",
                    EXIT_UNREACHABLE)
    unknown = ApiError("GET /flow/%2F/q: 404: queue 'q' in vhost '/' is not known", status=404)
    sidecar = ScriptedSidecar(
        {"flowStopped": False, "version": 4}, {"flowStopped": True, "version": 5},
        down, unknown, down, {"flowStopped": False, "version": 9}, {"version": 10}, down)
    watcher = FlowWatcher(sidecar, "queue 'q'", on_unreachable="block", poll_wait=30)
    caplog.set_level(logging.INFO, logger="flow_sidecar.client")

    signals = []
    for _ in sidecar.script[:]:
        watcher.poll_once(watcher.poll_wait)
        signals.append(watcher.signal)

    assert signals == [Signal.GO, Signal.STOP, Signal.UNKNOWN, Signal.UNKNOWN,
                       Signal.UNKNOWN, Signal.GO, Signal.UNKNOWN, Signal.UNKNOWN]
    # the version seen is sent back; after a failure the next request does not wait
    assert [since for since, _ in sidecar.calls] == [None, 4, 5, None, None, None, 9, None]
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("WARNING", ("flow-sidecar gives no flow state for queue 'q' (cannot reach "
                     "flow-sidecar at http://127.0.0.1:1: ConnectionError); holding "
                     "messages until it answers")),
        ("INFO", "flow-sidecar answers again for queue 'q'; obeying flow control"),
        ("WARNING", ("flow-sidecar gives no flow state for queue 'q' (unexpected answer: "
                     "KeyError: 'flowStopped'); holding messages until it answers")),
    ]


def test_a_closed_watcher_ignores_late_answers() -> None:
    watcher = FlowWatcher(ScriptedSidecar({"flowStopped": True, "version": 1}), "queue 'q'")
    watcher.close()
    watcher.poll_once(None)
    assert watcher.signal is Signal.UNKNOWN
    assert watcher.wait_until(lambda s: False, timeout=5) is Signal.UNKNOWN  # no hang
