"""The writes of the vhost API: a vhost's store quota and its default queue thresholds.

Each is validated by Qpid's rules first (refused: `SettingsRejected`, nothing stored),
then handed to the engine, which changes the broker-wide state, re-tells the vhost's
queues and stores the values in one transaction (`StoreUnavailable`: nothing changed).
"""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.flow.broker_wide import DEFAULTS, QUOTA
from sidecar.flow.engine import FlowEngine, SettingsRejected
from sidecar.flow.engine_writes import settings_problems
from sidecar.flow.vhost_quota import quota_problems


def _write(engine: FlowEngine, kind: str, vhost: str, values: Mapping[str, float] | None,
           now: float) -> None:
    wide = engine.broker_wide

    def change() -> None:
        if kind == QUOTA:
            wide.set_quota(vhost, values, now)
        else:
            wide.set_queue_defaults(vhost, values)

    engine.reconfigure_vhost(vhost, now, change,
                             lambda: engine.store.put_vhost_settings(kind, vhost, values, now))


def put_quota(engine: FlowEngine, vhost: str, values: Mapping[str, float], now: float) -> None:
    """Store a vhost's quota (replacing an earlier one); it applies at once to the
    vhost's last total, so an already overfull vhost stops its producers now."""
    problems = quota_problems(values)
    if problems:
        raise SettingsRejected(problems)
    _write(engine, QUOTA, vhost, values, now)


def put_queue_defaults(engine: FlowEngine, vhost: str, values: Mapping[str, float],
                       now: float) -> None:
    """Store a vhost's default qpid.flow_* thresholds (Broker-J's virtual-host `capacity`
    and `flowResumeCapacity`) and warning settings (`flow.warning_*`). Only the value rules apply here; a stop above one queue's
    maximum is reported on that queue (`configErrors`) and skipped for it alone."""
    problems = settings_problems(values, None, engine.defaults)
    if problems:
        raise SettingsRejected(problems)
    _write(engine, DEFAULTS, vhost, values, now)


def delete(engine: FlowEngine, kind: str, vhost: str, now: float) -> bool:
    """Forget a vhost's quota or defaults; False when none were stored. A vhost that was
    overfull resumes (MST-1009)."""
    stored = (engine.broker_wide.quota(vhost) if kind == QUOTA
              else engine.broker_wide.queue_defaults(vhost))
    if stored is None:
        return False
    _write(engine, kind, vhost, None, now)
    return True


__all__ = ["DEFAULTS", "QUOTA", "delete", "put_queue_defaults", "put_quota"]
