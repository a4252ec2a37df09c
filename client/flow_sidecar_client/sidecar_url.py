"""Where every client finds the sidecar: one setting, `FLOW_SIDECAR_URL`."""

from __future__ import annotations

import os
from collections.abc import Mapping

DEFAULT_SIDECAR_URL = "http://127.0.0.1:8080"
#: The variable every client reads: the publishers, flow-config and flow-pipeline --apply.
ENV = "FLOW_SIDECAR_URL"


def sidecar_url(given: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """`given`, else FLOW_SIDECAR_URL, else http://127.0.0.1:8080 (deploy/run.sh's port)."""
    if given:
        return given
    return (os.environ if environ is None else environ).get(ENV) or DEFAULT_SIDECAR_URL
