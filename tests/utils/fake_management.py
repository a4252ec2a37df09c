"""A fake RabbitMQ management API on loopback: real HTTP, scripted answers.

For the answers a real broker cannot be made to give (a negative depth, an empty node
list, a body that trickles in, a page count of 10^9, bindings without a destination):
the real adapter reads them over a real socket, so its timeouts, paging and parsing are
what is tested. Each path answers `answers[path]`: a JSON value, or a callable taking the
query parameters and returning one. `trickle` sends the body one byte every that many
seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

Answer = Any | Callable[[dict[str, str]], Any]


def queue_page(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One page holding every item, as `/api/queues?page=1` answers."""
    return {"items": items, "page": 1, "page_count": 1 if items else 0,  # as RabbitMQ says
            "total_count": len(items),
            "filtered_count": len(items), "item_count": len(items), "page_size": 500}


class FakeManagement:
    """The scripted answers and the server that gives them."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {
            "/api/queues": queue_page([]),
            "/api/nodes": [{"name": "rabbit@fake", "running": True, "mem_alarm": False,
                            "disk_free_alarm": False}],
            "/api/vhosts": [{"name": "/"}],
            "/api/exchanges": [],
            "/api/bindings": [],
            "/api/policies": [],
            "/api/operator-policies": [],
            "/api/consumers": [],
        }
        self.trickle: float | None = None
        self.asked: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                fake.asked.append(parts.path)
                answer = fake.answers.get(parts.path)
                if answer is None:
                    self.send_error(404)
                    return
                if callable(answer):
                    answer = answer(dict(parse_qsl(parts.query)))
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if fake.trickle is None:
                        self.wfile.write(body)
                        return
                    for byte in body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(fake.trickle)
                except OSError:  # the client gave up: fine
                    pass

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def fake_management() -> Iterator[FakeManagement]:
    """A running FakeManagement, shut down afterwards."""
    fake = FakeManagement()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
