"""Where webhooks may be sent: a policy on the receiver's address, and the HTTP transport
that enforces it on every connection.

Anyone who may subscribe a URL makes the sidecar send requests from inside the network it
runs in. Refused always: link-local addresses (169.254.0.0/16 and fe80::/10, where cloud
metadata services answer), unspecified, multicast, broadcast and reserved addresses, the
shared 100.64.0.0/10 block (Alibaba's metadata address is in it) and the Erlang ports a
broker host listens on (epmd 4369, distribution 25672). Refused unless
`--webhook-allow-private`: loopback, private networks (10/8, 172.16/12, 192.168/16,
fc00::/7) and other addresses that are not global. IPv4 written as a number
(`2130706433`), in hex or octal, mapped into IPv6 or NAT64 is judged as the IPv4 it is.

A subscription's URL is checked when it is made (literal addresses and `localhost`); the
transport checks the address each connection actually reaches, after DNS, so a name that
resolves elsewhere later (DNS rebinding) is refused at delivery. Redirects are never
followed, and the environment (proxies, .netrc credentials) is not used.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from sidecar.signals.webhook_delivery import Transport

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

REFUSED_PORTS = {4369: "the Erlang port mapper (epmd)", 25672: "Erlang distribution"}
ALWAYS_REFUSED = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "192.0.0.0/24", "224.0.0.0/3",
    "::/128", "fe80::/10", "ff00::/8", "fd00:ec2::254/128")]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$", re.IGNORECASE)


class TargetRefused(Exception):
    """A webhook target the policy does not allow."""


def ipv4_inside(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), else `address`."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def literal_address(host: str) -> Address | None:
    """The address a URL's host names without DNS: an IP literal, or IPv4 the way
    inet_aton reads it (`2130706433`, `0x7f.1`, `0177.0.0.1`); None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


@dataclass(frozen=True)
class TargetPolicy:
    """Which receivers webhooks may reach; see the module docstring."""

    allow_private: bool = False

    def address_problem(self, address: Address) -> str | None:
        """Why webhooks may not go to `address`, or None."""
        inner = ipv4_inside(address)
        refused = any(inner in net for net in ALWAYS_REFUSED if net.version == inner.version) \
            or inner.is_unspecified or inner.is_link_local or inner.is_multicast
        local = not refused and (inner.is_loopback or inner.is_private)  # ::1 is "reserved" too
        if refused or (inner.is_reserved and not local):
            return (f"{address} is a link-local, metadata, unspecified or reserved address, "
                    "never a webhook receiver")
        if not inner.is_global and not self.allow_private:
            return (f"{address} is a loopback or private address "
                    "(--webhook-allow-private allows those)")
        return None

    def port_problem(self, port: int) -> str | None:
        """Why webhooks may not go to `port`, or None."""
        if port in REFUSED_PORTS:
            return f"port {port} is {REFUSED_PORTS[port]}, never a webhook receiver"
        return None

    def url_problem(self, url: str) -> str | None:
        """What is wrong with `url` as far as it shows without DNS, or None."""
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        problem = self.port_problem(parts.port or (443 if parts.scheme == "https" else 80))
        if problem:
            return problem
        if host == "localhost" or host.endswith(".localhost"):
            return None if self.allow_private else (
                f"{host} is loopback (--webhook-allow-private allows it)")
        address = literal_address(host)
        return None if address is None else self.address_problem(address)

    def check_peer(self, sock: socket.socket) -> None:
        """Raise TargetRefused (closing `sock`) when it is connected where webhooks may not go."""
        host, port = sock.getpeername()[:2]
        address = ipaddress.ip_address(host.partition("%")[0])
        problem = self.address_problem(address) or self.port_problem(port)
        if problem:
            sock.close()
            raise TargetRefused(f"refused by the webhook target policy: {problem}")


def checked_transport(policy: TargetPolicy) -> Transport:
    """The production webhook transport: a POST through `checked_session(policy)`. A 3xx is
    a failed attempt: a signed event goes to the URL the operator subscribed, nowhere else."""
    session = checked_session(policy)

    def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
        response = session.post(
            url, data=body, timeout=timeout, allow_redirects=False, stream=True,
            headers={**headers, "content-type": "application/json",
                     "user-agent": "flow-sidecar"})
        response.close()  # the answer's body is of no interest
        return response.status_code

    return post


def checked_session(policy: TargetPolicy) -> requests.Session:
    """A requests session whose every connection is checked by `policy` once connected,
    without proxies or credentials from the environment."""

    class CheckedHTTP(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            policy.check_peer(sock)
            return sock

    class CheckedHTTPS(CheckedHTTP, HTTPSConnection):
        """HTTPS whose connections CheckedHTTP's `_new_conn` checks."""

    class CheckedHTTPPool(HTTPConnectionPool):
        ConnectionCls = CheckedHTTP

    class CheckedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = CheckedHTTPS

    class CheckedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {
                "http": CheckedHTTPPool, "https": CheckedHTTPSPool}

    session = requests.Session()
    session.trust_env = False
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))  # keep none
    session.mount("http://", CheckedAdapter(max_retries=0))
    session.mount("https://", CheckedAdapter(max_retries=0))
    return session
