"""The wiring of producer classes outside the engine: the shared state's parameter, the
producer header as the fast path parses it, the clients' headers and flow-config's option
(docs/graded-flow.md#producer-classes)."""

from __future__ import annotations

import argparse

import pytest

from api.edge.protocol import producer_headers
from flow_sidecar_client.credit import grant_headers
from flow_sidecar_client.flowconfig_vhosts import producer_class
from sidecar.cluster.shared_view import parse, settings_parameter

KEY = ("/", "jobs")


def test_a_queues_classes_travel_in_its_shared_settings_parameter() -> None:
    name, value = settings_parameter(KEY, {"qpid.flow_stop_count": 100}, {"bulk": 0.5})
    view = parse({name: value})
    assert view.settings[KEY] == {"qpid.flow_stop_count": 100}
    assert view.classes[KEY] == {"bulk": 0.5} and not view.problems
    name, plain = settings_parameter(KEY, {"qpid.flow_stop_count": 100})
    assert "producerClasses" not in plain and KEY not in parse({name: plain}).classes
    bad = parse({name: {**value, "producerClasses": {"bulk": 2}}})
    assert KEY not in bad.settings and bad.problems  # another program's value: not trusted


def scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"headers": list(headers)}


def test_the_fast_path_reads_the_class_header_and_refuses_a_bad_one() -> None:
    assert producer_headers(scope((b"x-producer-class", b"bulk"))) == (None, 0, None, "bulk", None)
    assert producer_headers(scope((b"x-producer-id", b"p"), (b"x-producer-class", b"a.b-c_1"),
                                  (b"x-producer-class", b"second"))) == (
        "p", 0, None, "a.b-c_1", None)  # the first of repeated headers, as FastAPI takes
    assert producer_headers(scope()) == (None, 0, None, None, None)
    for bad in (b"", b"a b", b"-x", b"x" * 65, "é".encode()):
        assert producer_headers(scope((b"x-producer-class", bad))) is None  # the route's 422


def test_the_clients_say_their_class_on_grant_asks() -> None:
    assert grant_headers("p", "bulk")["X-Producer-Class"] == "bulk"
    assert "X-Producer-Class" not in grant_headers("p")


def test_flow_config_takes_name_equals_fraction() -> None:
    assert producer_class("bulk=0.6") == ("bulk", 0.6)
    for bad in ("bulk", "bulk=x"):
        with pytest.raises(argparse.ArgumentTypeError, match="NAME=FRACTION"):
            producer_class(bad)
