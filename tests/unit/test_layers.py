"""The architecture, checked: the core never imports the web layer, and the pure modules
(the flow rules, exchange routing) import nothing that does I/O."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ["sidecar/flow/thresholds.py", "sidecar/flow/state_machine.py",
        "sidecar/flow/hot_set.py", "sidecar/flow/live_depth.py",
        "sidecar/flow/queue_limits.py", "sidecar/signals/exchange_routing.py",
        "sidecar/model.py", "sidecar/flow/stop_reasons.py", "sidecar/flow/vhost_quota.py",
        "sidecar/flow/broker_alarms.py", "api/queue_selection.py",
        "sidecar/name_patterns.py",
        "sidecar/flow/fill_rate.py", "sidecar/flow/pacing.py",
        "sidecar/flow/producer_classes.py", "sidecar/records/top_producers.py",

        "client/flow_sidecar_client/outage.py", "client/flow_sidecar_client/credit_ledger.py",
        "client/flow_sidecar_client/watch_state.py", "client/flow_sidecar_client/flow_wait.py",
        "client/flow_sidecar_client/send_pacing.py"]
IO_MODULES = {"requests", "pika", "sqlite3", "socket", "asyncio", "fastapi", "uvicorn",
              "subprocess", "threading", "time"}


def imports(path: Path) -> set[str]:
    """Every module `path` imports, by its full dotted name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_nothing_in_the_core_imports_the_web_layer() -> None:
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if
                                                  m == "api" or m.startswith("api."))
                 for p in (ROOT / "sidecar").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_pure_modules_do_no_io() -> None:
    for name in PURE:
        used = {m.split(".")[0] for m in imports(ROOT / name)}
        assert not used & IO_MODULES, (name, used & IO_MODULES)


def test_the_value_types_import_nothing_of_the_sidecar() -> None:
    """sidecar/model.py is what every layer shares, so it takes no types from sidecar/flow
    (or anywhere else in the sidecar): the flow rules re-export the values it defines."""
    assert {m for m in imports(ROOT / "sidecar/model.py") if m.split(".")[0] in
            {"sidecar", "api", "flow_sidecar_client", "pipeline"}} == set()
