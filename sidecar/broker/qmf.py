"""A small QMFv2 console over AMQP 1.0: what the Qpid C++ adapter and its tests ask qpidd.

QMF is how qpidd exposes its management objects (queues with `msgDepth`, `byteDepth`,
`flowStopped`, `flowStoppedCount`, `arguments`; exchanges; bindings) and methods (`create`,
`delete` on the broker object). A request is a map message to `qmf.default.direct` with
subject `broker` and the application properties `x-amqp-0-10.app-id: qmf2` and
`qmf.opcode`; answers come to a dynamic reply queue, a large query in several messages of
which all but the last carry the property `partial`.

Python's AMQP 1.0 client is Debian's `python3-qpid-proton` (or PyPI's python-qpid-proton);
`deploy/ensure-qpidd.sh` makes it visible to the project's venv. It is imported lazily, so
the rest of the sidecar works without it. A proton connection is not thread-safe: every
call takes the console's lock (the poller, the bindings cache and settings writes run in
worker threads). A connection that failed is dropped and made again on the next call.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

BROKER_OBJECT = {"_object_name": "org.apache.qpid.broker:broker:amqp-broker"}


class QmfError(Exception):
    """The broker could not be reached or gave no usable answer."""


class QmfRefused(QmfError):
    """The broker answered a method with an exception (e.g. invalid-argument)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def plain(value: Any) -> Any:
    """QMF values as Python ones: AMQP binaries that hold text (names, string arguments)
    become str; maps and lists are converted all the way down."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def object_name(ref: Any) -> str:
    """The last part of a QMF object id (`org.apache.qpid.broker:queue:orders` -> `orders`)."""
    if isinstance(ref, Mapping):
        ref = ref.get("_object_name", "")
    text = str(plain(ref))
    parts = text.split(":", 2)
    return parts[2] if len(parts) == 3 else text


class QmfConsole:
    """One AMQP 1.0 connection to qpidd used for QMF requests, made on first use."""

    def __init__(self, url: str, *, user: str | None = None, password: str | None = None,
                 timeout: float = 5.0) -> None:
        parts = urlsplit(url if "://" in url else "amqp://" + url)
        self._address = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}"
        self._user = unquote(parts.username) if parts.username else user
        self._password = unquote(parts.password) if parts.password else password
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn: Any = None
        self._sender: Any = None
        self._replies: Any = None

    @property
    def reply_queue(self) -> str | None:
        """The broker-side name of this console's temporary reply queue, once connected
        (it shows in queue queries like any other queue)."""
        replies = self._replies
        return None if replies is None else str(plain(replies.remote_source.address))

    def _connect(self) -> None:
        try:
            from proton.utils import BlockingConnection
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise QmfError("the Python AMQP 1.0 client (proton) is not installed: run "
                           "deploy/ensure-qpidd.sh or install python3-qpid-proton") from exc
        from proton import ProtonException
        from proton.reactor import DynamicNodeProperties

        options: dict[str, Any] = {"timeout": self._timeout}
        if self._user:
            options.update(user=self._user, password=self._password or "",
                           allowed_mechs="PLAIN")
        try:
            self._conn = BlockingConnection(self._address, **options)
            # Unbounded: a reply queue under --default-queue-limit would refuse (drop) a
            # query answer larger than that limit, and the query would time out.
            self._replies = self._conn.create_receiver(None, dynamic=True, options=(
                DynamicNodeProperties({"qpid.max_size": 0, "qpid.max_count": 0})))
            self._sender = self._conn.create_sender("qmf.default.direct")
        except (ProtonException, OSError) as exc:
            self._drop()
            raise QmfError(f"cannot connect to qpidd at {self._address}: "
                           f"{type(exc).__name__}: {exc}") from None

    def _drop(self) -> None:
        conn, self._conn, self._sender, self._replies = self._conn, None, None, None
        if conn is not None:
            from proton import ProtonException

            with contextlib.suppress(ProtonException, OSError):  # a broken one is gone anyway
                conn.close()

    def _request(self, opcode: str, body: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Send one request; every answer message (opcode, body) up to the last partial."""
        from proton import Message, ProtonException

        if self._conn is None:
            self._connect()
        correlation = str(uuid.uuid4())
        answers: list[tuple[str, Any]] = []
        try:
            self._sender.send(Message(
                body=dict(body), subject="broker", correlation_id=correlation,
                reply_to=self._replies.remote_source.address,
                properties={"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": opcode,
                            "method": "request"}), timeout=self._timeout)
            while True:
                reply = self._replies.receive(timeout=self._timeout)
                self._replies.accept()
                if str(plain(reply.correlation_id)) != correlation:
                    continue  # a late answer to an earlier request that timed out
                props = reply.properties or {}
                answers.append((str(plain(props.get("qmf.opcode", ""))), reply.body))
                if "partial" not in props:
                    return answers
        except (ProtonException, OSError) as exc:
            self._drop()
            raise QmfError(f"QMF {opcode} to {self._address}: {type(exc).__name__}: "
                           f"{exc}") from None

    def query(self, class_name: str) -> list[dict[str, Any]]:
        """The `_values` of every object of a class (`queue`, `exchange`, `binding`)."""
        with self._lock:
            answers = self._request("_query_request", {
                "_what": "OBJECT", "_schema_id": {"_class_name": class_name}})
        objects: list[dict[str, Any]] = []
        for opcode, body in answers:
            if opcode == "_exception":
                raise QmfRefused(exception_text(body))
            for item in body or []:
                values = plain(item).get("_values")
                if isinstance(values, dict):
                    objects.append(values)
        return objects

    def call(self, method: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Invoke a method of the broker object (`create`, `delete`); its out-arguments,
        or QmfRefused with the broker's text."""
        with self._lock:
            answers = self._request("_method_request", {
                "_object_id": BROKER_OBJECT, "_method_name": method,
                "_arguments": dict(arguments)})
        opcode, body = answers[-1]
        if opcode == "_exception":
            raise QmfRefused(exception_text(body))
        result = plain(body) if isinstance(body, Mapping) else {}
        arguments_out = result.get("_arguments", {})
        return arguments_out if isinstance(arguments_out, dict) else {}

    def close(self) -> None:
        """Close the connection (a later call connects again)."""
        with self._lock:
            self._drop()


def exception_text(body: Any) -> str:
    """The text of a QMF `_exception` answer (`invalid-argument: Queue "q": ...`)."""
    values = plain(body).get("_values", {}) if isinstance(body, Mapping) else {}
    text = values.get("error_text") if isinstance(values, dict) else None
    return str(text) if text else str(plain(body))
