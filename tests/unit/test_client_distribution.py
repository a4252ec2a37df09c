"""The client is a distribution of its own (client/, `flow-sidecar-client`): it needs only
requests and pika, and importing it loads nothing of the server or its web stack."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "client"
SERVER_SIDE = ["fastapi", "uvicorn", "starlette", "pydantic_settings", "prometheus_client",
               "pyspark", "matplotlib", "sidecar", "api", "pipeline"]
#: the client's modules that need an extra are named for it: aio.py, aio_watch.py, ...
EXTRAS = ("aio", "celery")
#: import name -> the distribution that brings it, where they differ
PROVIDED_BY = {"aio_pika": "aio-pika", "aiormq": "aio-pika", "pamqp": "aio-pika",
               "kombu": "celery", "urllib3": "requests"}


def _extra(path: Path) -> str | None:
    prefix = path.stem.split("_")[0]
    return prefix if prefix in EXTRAS else None


def _project() -> dict[str, object]:
    return tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def _name(spec: str) -> str:
    return re.split(r"[<>=\[ ;~!]", spec, maxsplit=1)[0].lower()


def test_the_client_requires_only_requests_and_pika() -> None:
    project = _project()
    assert project["name"] == "flow-sidecar-client"
    assert {_name(d) for d in project["dependencies"]} == {"requests", "pika"}  # type: ignore[attr-defined]
    assert set(project["optional-dependencies"]) >= set(EXTRAS)  # type: ignore[arg-type]
    assert "flow-config" in project["scripts"]  # type: ignore[operator]


def test_importing_the_client_loads_nothing_of_the_server() -> None:
    """In a fresh interpreter, from outside the repository (so that only the installed
    distribution is importable), every module of the client: those of an extra too when
    the extra is installed (the test extra installs `aio`)."""
    installed = {"aio": find_spec("aio_pika") is not None,
                 "celery": find_spec("celery") is not None}
    modules = sorted(p.stem for p in (CLIENT / "flow_sidecar_client").glob("*.py")
                     if p.stem != "__init__" and installed.get(_extra(p) or "", True))
    code = ("import json, sys, flow_sidecar_client\n"
            + "".join(f"import flow_sidecar_client.{m}\n" for m in modules)
            + "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                         text=True, check=True, timeout=60).stdout
    loaded = {m.split(".")[0] for m in json.loads(out)}
    assert loaded & set(SERVER_SIDE) == set()


def test_every_third_party_import_of_the_client_is_declared() -> None:
    """Required modules import only the required dependencies; a module named for an extra
    imports only what that extra adds."""
    project = _project()
    required = {_name(d) for d in project["dependencies"]}  # type: ignore[attr-defined]
    extras = {name: {_name(d) for d in specs}
              for name, specs in project["optional-dependencies"].items()}  # type: ignore[attr-defined]
    for path in (CLIENT / "flow_sidecar_client").glob("*.py"):
        used = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                used |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                used.add(node.module.split(".")[0])
        third = used - set(sys.stdlib_module_names) - {"__future__", "flow_sidecar_client"}
        extra = _extra(path)
        allowed = required | (extras[extra] if extra else set())
        names = {PROVIDED_BY.get(m, m).lower().replace("_", "-") for m in third}
        assert names <= allowed, (path.name, names - allowed)
