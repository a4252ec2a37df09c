"""A minimal W3C WebDriver client over `requests`, for the dashboard test.

Why not Selenium: the test needs five commands (new session, navigate, run a script, take a
screenshot, end the session), each a small JSON request to Debian's `chromedriver`; speaking
the protocol directly adds no dependency and keeps every step of the test visible.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.utils.sidecar_process import eventually, free_port

CHROMIUM = Path("/usr/bin/chromium")
# MACHINE-NOTES: without these the closed network makes Chromium retry connections
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


class WebDriverError(RuntimeError):
    """chromedriver refused a command; not an AssertionError, so `eventually` won't retry it."""


class Browser:
    """One WebDriver session: one window whose page keeps running between calls."""

    def __init__(self, http: requests.Session, session_url: str) -> None:
        self.http = http
        self.session_url = session_url

    def _call(self, method: str, path: str = "", body: dict[str, Any] | None = None) -> Any:
        r = self.http.request(method, self.session_url + path, json=body, timeout=60)
        value = r.json().get("value")
        if not r.ok:
            raise WebDriverError(f"{method} {path or '/'}: {value.get('error')}: "
                                 f"{value.get('message', '')[:500]}")
        return value

    def open(self, url: str) -> None:
        """Navigate; returns once the document has loaded (its timers then keep running)."""
        self._call("POST", "/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """Run `script` as a function body in the page (`arguments[i]`); its JSON result."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self) -> bytes:
        """A PNG of the window as the open page shows it now: no reload, unlike --screenshot."""
        return base64.b64decode(self._call("GET", "/screenshot"))


@contextmanager
def chromium(workdir: Path, *args: str) -> Iterator[Browser]:
    """Headless Chromium (fresh profile in `workdir`) driven by its own chromedriver.

    The session is deleted (which closes Chromium) and chromedriver stopped afterwards,
    whether the test passed or not, so no browser outlives the test.
    """
    driver = shutil.which("chromedriver")
    if driver is None or not CHROMIUM.exists():
        pytest.fail("no chromedriver or /usr/bin/chromium: run the tests with deploy/test.sh, "
                    "which runs deploy/ensure-chromium.sh")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(workdir / "chromedriver.log", "ab") as log:
        proc = subprocess.Popen([driver, f"--port={port}"], stdout=log, stderr=subprocess.STDOUT)
    http = requests.Session()
    session_url: str | None = None
    try:
        eventually(lambda: http.get(base + "/status", timeout=1).json()["value"]["ready"],
                   timeout=20)
        profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
        options = {"binary": str(CHROMIUM),
                   "args": [*CHROMIUM_ARGS, f"--user-data-dir={profile}", *args]}
        r = http.post(base + "/session", timeout=60, json={"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options,
            "timeouts": {"pageLoad": 20_000, "script": 10_000}}}})
        if not r.ok:
            raise WebDriverError(f"new session: {r.text[:1000]}")
        session_url = f"{base}/session/{r.json()['value']['sessionId']}"
        yield Browser(http, session_url)
    finally:
        if session_url is not None:
            try:
                http.delete(session_url, timeout=30)
            except requests.RequestException:
                pass  # chromedriver is stopped below either way
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        http.close()
