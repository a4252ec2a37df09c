"""--apply planning and its dry run (no sidecar is contacted without --yes)."""

from __future__ import annotations

import requests

from flow_sidecar_client.api import FlowApi
from pipeline.apply import apply, planned


def test_dry_run_prints_percent_encoded_puts_of_changed_dimensions_only() -> None:
    rows = [
        {"vhost": "/", "queue": "a/b c", "dimension": "count", "changed": True,
         "recommendedStop": 850, "recommendedResume": 750},
        {"vhost": "/", "queue": "a/b c", "dimension": "size", "changed": True,
         "recommendedStop": 9000, "recommendedResume": 8000},
        {"vhost": "v", "queue": "same", "dimension": "count", "changed": False,
         "recommendedStop": 80, "recommendedResume": 70},
    ]
    plan = planned(rows)
    assert plan == {("/", "a/b c"): {
        "qpid.flow_stop_count": 850, "qpid.flow_resume_count": 750,
        "qpid.flow_stop_size": 9000, "qpid.flow_resume_size": 8000}}

    class Refuse(requests.Session):
        def request(self, *args: object, **kw: object) -> requests.Response:  # type: ignore[override]
            raise AssertionError("a dry run must not send anything")

    said: list[str] = []
    failed = apply(plan, FlowApi("http://127.0.0.1:1", session=Refuse()), write=False,
                   say=said.append)
    assert failed == 0
    assert said == [("dry run: PUT /queues/%2F/a%2Fb%20c/flow {'qpid.flow_stop_count': 850, "
                     "'qpid.flow_resume_count': 750, 'qpid.flow_stop_size': 9000, "
                     "'qpid.flow_resume_size': 8000} (other stored settings kept)")]
