"""The webhook target policy (pure): which receiver addresses webhooks may reach."""

from __future__ import annotations

import ipaddress

import pytest

from sidecar.signals.webhook_targets import TargetPolicy, literal_address

STRICT, PRIVATE_OK = TargetPolicy(), TargetPolicy(allow_private=True)

ALWAYS_REFUSED = [
    "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://0.0.0.0:8080/",
    "http://[::]/", "http://0/", "http://2852039166/",  # 169.254.169.254 as a number
    "http://0xa9.0xfe.0xa9.0xfe/", "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/", "http://100.100.100.200/", "http://224.0.0.1/",
    "http://255.255.255.255/", "http://[fd00:ec2::254]/", "http://example.com:4369/",
    "http://127.0.0.1:4369/", "https://receiver.example:25672/",
]
PRIVATE = [
    "http://10.0.0.1/", "http://127.0.0.1:8080/h", "http://[::1]/", "http://2130706433/",
    "http://0x7f.1/", "http://0177.0.0.1/", "http://localhost:9000/", "http://app.localhost/",
    "http://192.168.1.10/", "http://172.16.0.5/", "http://[fd12::1]/",
    "http://[::ffff:127.0.0.1]/",
]
PUBLIC = ["https://hooks.example.com/flow", "http://93.184.216.34/", "http://8.8.8.8:8443/",
          "http://[2606:4700::1111]/", "http://receiver.internal.example/"]


@pytest.mark.parametrize("url", ALWAYS_REFUSED)
def test_link_local_metadata_unspecified_and_erlang_ports_are_always_refused(url: str) -> None:
    assert STRICT.url_problem(url)
    assert PRIVATE_OK.url_problem(url), url


@pytest.mark.parametrize("url", PRIVATE)
def test_loopback_and_private_need_the_option(url: str) -> None:
    assert "--webhook-allow-private" in (STRICT.url_problem(url) or "")
    assert PRIVATE_OK.url_problem(url) is None


@pytest.mark.parametrize("url", PUBLIC)
def test_public_addresses_and_names_are_allowed(url: str) -> None:
    """Names are judged when connecting (by the address reached), not here."""
    assert STRICT.url_problem(url) is None


@pytest.mark.parametrize(("host", "address"), [
    ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("127.1", "127.0.0.1"),
    ("017700000001", "127.0.0.1"), ("::1", "::1"), ("example.com", None), ("1.2.3.4.5", None),
    ("08", None),
])
def test_literal_addresses_in_every_spelling(host: str, address: str | None) -> None:
    expected = None if address is None else ipaddress.ip_address(address)
    assert literal_address(host) == expected
