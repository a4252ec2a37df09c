"""A webhook receiver for tests: a small HTTP server on 127.0.0.1 in a thread.

It verifies every request the way docs/webhooks.md tells users to (independently of the
sidecar's own signing code), records what arrived and answers `status`; it can be
stopped and started again on the same port, as a receiver restarting would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    webhook_id: str
    timestamp: int
    valid: bool
    event: dict[str, Any]
    received_at: float
    answered: int


def verify(secret: str, headers: Any, body: bytes) -> bool:
    """Standard Webhooks verification, as in docs/webhooks.md."""
    key = (base64.b64decode(secret.removeprefix("whsec_")) if secret.startswith("whsec_")
           else secret.encode())
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(sig.removeprefix("v1,"), expected)
               for sig in headers["webhook-signature"].split())


class WebhookReceiver:
    """Answers `status` (a 2xx, 500, 410 ...) to correctly signed requests, 401 otherwise."""

    def __init__(self, secret: str, status: int = 204, delay: float = 0.0) -> None:
        self.secret = secret
        self.status = status
        self.delay = delay  # seconds each answer is held back: a slow receiver
        self.port = 0
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/flow"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                valid = verify(receiver.secret, self.headers, body)
                answered = receiver.status if valid else 401
                receiver._record(Received(
                    self.headers["webhook-id"], int(self.headers["webhook-timestamp"]), valid,
                    json.loads(body), time.time(), answered))
                time.sleep(receiver.delay)
                self.send_response(answered)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening: deliveries now fail with connection refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def events(self) -> list[Received]:
        """What arrived and was accepted (2xx), in arrival order."""
        with self._lock:
            return [r for r in self.received if 200 <= r.answered < 300]
