"""Producer classes and pacing in `/metrics` and the history, through the app as
`sidecar.runtime` wires it (scripted broker, in process): the class and pacing series,
and the `settings` records of a class change and of the first producer report."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import MakeAPI
from tests.api.test_class_answers import at_depth, classed
from tests.utils.paths import flow_path, queue_path

pytestmark = pytest.mark.anyio


async def test_metrics_and_settings_records_of_classes_and_pacing(make_api: MakeAPI) -> None:
    api = await classed(make_api)  # jobs: stop 100, bulk 0.5
    await at_depth(api, 60)  # bulk stopped
    r = await api.client.get(flow_path("jobs"), headers={
        "X-Producer-Id": "p1", "X-Producer-Published": "5"})
    assert r.status_code == 200, r.text
    await at_depth(api, 120)  # the queue stops: paced
    text = (await api.client.get("/metrics")).text
    samples = {(s.name, s.labels.get("queue"), s.labels.get("class")): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("flow_sidecar_queue_class_stopped", "jobs", "bulk")] == 1.0
    assert samples[("flow_sidecar_queue_paced", "jobs", None)] == 1.0
    assert samples[("flow_sidecar_queue_suggested_rate", "jobs", None)] == 0.0  # stopped
    assert samples[("flow_sidecar_classes_stopped", None, None)] == 1.0
    assert samples[("flow_sidecar_queues_paced", None, None)] == 1.0

    r = await api.client.put(queue_path("jobs") + "/flow", json={"qpid.flow_stop_count": 100})
    assert r.status_code == 200, r.text  # classes removed
    runtime = api.sidecar.runtime
    runtime.recorder.close()
    records = [json.loads(line) for path in sorted(runtime.settings.history_path.rglob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "ts"} for r in records
            if r["type"] == "settings"] == [
        {"type": "settings", "vhost": "/", "queue": "jobs", "producerClasses": {"bulk": 0.5}},
        {"type": "settings", "vhost": "/", "queue": "jobs", "pacing": True},
        {"type": "settings", "vhost": "/", "queue": "jobs", "producerClasses": {}}]
