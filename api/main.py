"""`flow-sidecar`, the composition root: parse options, open the settings store, build the
sidecar's runtime and the API over it, serve with uvicorn.

The only module that knows every layer: `sidecar` builds the core (`build_runtime`),
`api.app` mounts the routes (`build_api`), `api.store` is the settings store both share.
Nothing in `sidecar/` imports `api/`.
"""

from __future__ import annotations

import logging
import resource
import sys
from dataclasses import dataclass

import uvicorn
from pydantic import ValidationError
from pydantic_settings import CliApp

from api.app import build_api
from api.edge.connection_limits import throttle_uvicorn_lines, uvicorn_options
from api.guards import Guards
from api.process_tuning import tune_process
from api.store import Store
from sidecar.broker import BrokerAdapter, LiveDepthSource
from sidecar.config import Settings
from sidecar.redaction import redact_url
from sidecar.runtime import Runtime, build_runtime


@dataclass
class Sidecar:
    """A whole sidecar: its settings store, its runtime and the ASGI app serving them."""

    store: Store
    runtime: Runtime
    asgi: Guards


def build(settings: Settings, adapter: BrokerAdapter | None = None,
          live_source: LiveDepthSource | None = None) -> Sidecar:
    """Open the store in the data directory, build the runtime over it (with `adapter` and
    `live_source`, or the broker the options name) and the API over that."""
    store = Store(settings.data_dir / "flow-sidecar.sqlite3")
    runtime = build_runtime(settings, store, adapter, live_source)
    return Sidecar(store, runtime, build_api(runtime, on_shutdown=store.close))


def create_app(settings: Settings, adapter: BrokerAdapter | None = None) -> Guards:
    """The ASGI application for `settings` (what uvicorn serves)."""
    return build(settings, adapter).asgi


def load_settings(argv: list[str]) -> Settings:
    """Settings from flags and FLOW_* variables; exits 2 with a readable message (never
    echoing values, which may be secrets) when they are refused."""
    try:
        return CliApp.run(Settings, cli_args=argv)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"])
            print(f"flow-sidecar: {where + ': ' if where else ''}{error['msg']}",
                  file=sys.stderr)
        raise SystemExit(2) from None


def raise_open_file_limit() -> int:
    """Lift the soft limit on open files to the hard one: every parked long-poll and SSE
    stream holds a socket, and the usual soft limit of 1,024 would refuse connections long
    before memory or the event loop are the limit. Returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep what we have; the log line below says how much that is
    return soft


def main(argv: list[str] | None = None) -> None:
    """Run the sidecar in the foreground until SIGINT/SIGTERM."""
    settings = load_settings(sys.argv[1:] if argv is None else argv)
    tune_process()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # pika logs every channel the live sampler opens, every 404 of a queue deleted under
    # it, and seven ERROR lines with a traceback for every refused reconnection attempt
    # while a broker restarts. Every pika failure reaches our code as an exception, which
    # logs one WARNING per outage and one INFO on recovery (flow_sidecar.live,
    # flow_sidecar.cluster); pika's own lines are for --log-level DEBUG only.
    logging.getLogger("pika").setLevel(
        logging.DEBUG if logging.getLogger().level <= logging.DEBUG else logging.CRITICAL)
    app = create_app(settings)
    logging.getLogger("flow_sidecar").info(
        "flow-sidecar on http://%s (broker %s, live depth %s, data %s, poll every %ss, "
        "%d open files)", settings.listen, ", ".join(map(redact_url, settings.management_url)),
        redact_url(settings.live_amqp_url) if settings.live_depth else "off",
        settings.data_dir, settings.poll_interval, raise_open_file_limit())
    throttle_uvicorn_lines()
    # Parked long-polls and SSE streams would hold a graceful shutdown for their whole wait;
    # clients reconnect, so give them a moment and go.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning",
                access_log=False, lifespan="on", timeout_graceful_shutdown=2,
                **uvicorn_options(settings))


if __name__ == "__main__":
    main()
