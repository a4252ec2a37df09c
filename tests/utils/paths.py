"""API paths with names percent-encoded the way RabbitMQ's API does."""

from __future__ import annotations

from urllib.parse import quote


def flow_path(queue: str, vhost: str = "/") -> str:
    return f"/flow/{quote(vhost, safe='')}/{quote(queue, safe='')}"


def queue_path(queue: str, vhost: str = "/") -> str:
    return f"/queues/{quote(vhost, safe='')}/{quote(queue, safe='')}"
