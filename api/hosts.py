"""Which `Host` and `Origin` values are the sidecar's own (pure; `api.guards` applies it).

DNS rebinding: a page of attacker.example whose name is made to resolve to 127.0.0.1 can
send requests to a sidecar on loopback that the browser treats as same-origin, so their
answers can be read and writes need no cross-site tricks. Those requests name the
attacker's host in `Host`; the sidecar answers only hosts that are its own: the address it
listens on, localhost names and loopback addresses, any IP literal when it listens on every
address (probes and scrapers reach a pod by its IP), and the globs of `--allowed-hosts`.

Cross-site writes: a browser sends `Origin` with every cross-origin write; a write whose
`Origin` is not the URL the request was sent to (or one of `--allowed-hosts`) comes from
another site's page.
"""

from __future__ import annotations

import ipaddress
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

_CACHE_SIZE = 256  # distinct Host values remembered; more are judged each time


def host_name(host: str) -> str | None:
    """The name or address of a `Host` value without port and brackets, lower case, without
    a trailing dot; None when it is not a host at all."""
    host = host.strip().lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostPolicy:
    """Judges `Host` headers and `Origin`s against the listen address and the configured
    host globs. Judgements of `Host` values are cached: this runs on every request."""

    def __init__(self, listen_host: str, allowed_hosts: str) -> None:
        self.listen = host_name(listen_host) or ""
        listen_address = _address(self.listen)
        self.any_address = listen_address is not None and listen_address.is_unspecified
        self.globs = [g.strip().lower() for g in allowed_hosts.split(",") if g.strip()]
        self._seen: dict[bytes, bool] = {}

    def allows(self, host: bytes) -> bool:
        """True when a request naming `host` (the raw header) may be served."""
        known = self._seen.get(host)
        if known is None:
            known = self._judge(host.decode("latin-1"))
            if len(self._seen) >= _CACHE_SIZE:  # many names (a scan): start over, as
                self._seen.clear()              # http_cache does, rather than stop caching
            self._seen[host] = known
        return known

    def _judge(self, host: str) -> bool:
        name = host_name(host)
        if name is None:
            return False
        if name == self.listen or name == "localhost" or name.endswith(".localhost"):
            return True
        address = _address(name)
        if address is not None and (address.is_loopback or self.any_address):
            return True
        return self.configured(name)

    def configured(self, name: str) -> bool:
        """True when `name` matches one of `--allowed-hosts`."""
        return any(fnmatchcase(name, glob) for glob in self.globs)

    def same_origin(self, origin: str, host: str, scheme: str) -> bool:
        """True when `origin` is the URL this request was sent to (scheme, host and port
        alike; `Origin: null` never is) or one of `--allowed-hosts` (behind a proxy the
        sidecar sees another Host and scheme than the browser)."""
        try:
            parts = urlsplit(origin.strip().lower())
            origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if not parts.scheme or not parts.hostname:
            return False
        if self.configured(parts.hostname.rstrip(".")):
            return True
        name = host_name(host)
        try:
            host_port = urlsplit(f"//{host.strip().lower()}").port or _DEFAULT_PORTS.get(scheme)
        except ValueError:
            return False
        return (parts.scheme, parts.hostname.rstrip("."), origin_port) == (scheme, name, host_port)


_DEFAULT_PORTS = {"http": 80, "https": 443}
