"""What `deploy/run.sh` installs (the project without extras) is enough to run it: every
third-party module the service's packages import is a base dependency in pyproject.toml
(the client distribution's own are checked by test_client_distribution.py).
The test suite installs the `test` extra, so a run-time import of a test-only package
(httpx once) would pass every other test and crash a user's first start."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sidecar", "api")
# import name -> the distribution that provides it, where they differ or come along
PROVIDED_BY = {"starlette": "fastapi", "pydantic_settings": "pydantic-settings",
               "prometheus_client": "prometheus_client", "urllib3": "requests",
               "flow_sidecar_client": "flow-sidecar-client",
               "re2": "google-re2"}
OPTIONAL = {"proton"}  # --broker qpid-cpp only: the `qpid` extra, imported when chosen


def imported_modules() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found


def test_every_third_party_import_is_a_base_dependency() -> None:
    declared = {re.split(r"[<>=\[ ;]", spec, maxsplit=1)[0].lower() for spec in tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    third_party = {m for m in imported_modules() - set(sys.stdlib_module_names)
                   if m not in PACKAGES and m != "__future__"}
    missing = {m for m in third_party - OPTIONAL
               if PROVIDED_BY.get(m, m).lower().replace("_", "-") not in
               {d.replace("_", "-") for d in declared}}
    assert not missing, f"imported at run time but not a base dependency: {sorted(missing)}"
