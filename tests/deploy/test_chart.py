"""The Helm chart, rendered by the real Helm binary for every ci/ scenario: what operators rely
on (probes, hardening, secrets, volumes, monitoring, rollouts), what it refuses, and that every
setting it passes is a flow-sidecar option that flow-sidecar accepts."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from api.hosts import HostPolicy
from sidecar.broker.qpid_cpp import QpidCppAdapter
from sidecar.broker.select import adapter_for, broker_kind
from sidecar.config import Settings
from tests.deploy.chart import (
    CHART,
    FLOW_NAMES,
    FULLNAME,
    NAMESPACE,
    REPO,
    SCENARIOS,
    Doc,
    Placement,
    RenderFn,
    by_kind,
    helm_run,
    one,
    placements,
    scenario_values,
    sets,
)

DEPLOYMENT_SCENARIOS = [s for s in SCENARIOS if s.startswith("deployment-")]
SIDECAR_SCENARIOS = [s for s in SCENARIOS if s.startswith("sidecar-")]

# Options the chart sets from its own values, never from `config`.
CHART_SET = {"listen", "data_dir", "management_url", "management_user", "management_password",
             "token", "producer_token", "insecure", "allowed_hosts", "shared_state",
             "shared_amqp_url", "shared_vhost"}
# Options left to their defaults, never from `config`: the AMQP URL is made from the
# management URL and credentials (in a ConfigMap it would carry a password).
DERIVED = {"amqp_url"}

Rendered = dict[str, list[Doc]]


def placed(rendered: Rendered, scenario: str) -> list[Placement]:
    found = placements(rendered[scenario])
    assert len(found) == (1 if scenario in DEPLOYMENT_SCENARIOS else 2), found
    return found


def test_scenarios_cover_both_modes_and_the_options() -> None:
    assert set(DEPLOYMENT_SCENARIOS) | set(SIDECAR_SCENARIOS) == set(SCENARIOS)
    assert DEPLOYMENT_SCENARIOS and SIDECAR_SCENARIOS
    assert any(scenario_values(s).get("serviceMonitor", {}).get("enabled") for s in SCENARIOS)
    assert any(scenario_values(s).get("insecure") for s in SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lint(helm: str, scenario: str) -> None:
    result = helm_run(helm, "lint", scenario, "--strict")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_objects_carry_the_chart_labels(rendered: Rendered, scenario: str) -> None:
    for doc in rendered[scenario]:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "flow-sidecar", doc["kind"]
        assert labels["app.kubernetes.io/instance"] == "flow"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_probes(rendered: Rendered, scenario: str) -> None:
    gate = scenario_values(scenario).get("sidecar", {}).get("gateBrokerReadiness", False)
    for place in placed(rendered, scenario):
        container = place.container
        assert "flow-http" in {port["name"] for port in container["ports"]}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "flow-http"}
        if place.where == "Deployment" or gate:
            assert container["readinessProbe"]["httpGet"] == {"path": "/readyz",
                                                              "port": "flow-http"}
        else:
            # A sidecar's readiness is its broker pod's: not gated unless asked for.
            assert "readinessProbe" not in container, place.where


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hardened(rendered: Rendered, scenario: str) -> None:
    for place in placed(rendered, scenario):
        security = place.container["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        # With a read-only root the only writable places are volumes of the pod.
        mounts = {m["mountPath"]: m["name"] for m in place.container["volumeMounts"]}
        assert set(mounts) == {"/data", "/tmp"}
        assert set(mounts.values()) <= {volume["name"] for volume in place.volumes}
        assert "resources" not in place.container
    for deployment in by_kind(rendered[scenario], "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_settings_are_options_flow_sidecar_accepts(
        rendered: Rendered, scenario: str,
        settings_from_env: Callable[[dict[str, str]], Settings]) -> None:
    config = one(rendered[scenario], "ConfigMap")["data"]
    for place in placed(rendered, scenario):
        container = place.container
        assert container["envFrom"] == [{"configMapRef": {"name": FULLNAME}}]
        env = {item["name"]: item for item in container["env"]}
        # POD_IP: the downward API's pod address, from which FLOW_ADVERTISE_URL is made
        unknown = (set(config) | set(env)) - FLOW_NAMES - {"POD_IP"}
        assert not unknown, f"flow-sidecar reads no such variables: {unknown}"
        # What the pod's environment would be, with placeholders for Secret values.
        environment = dict(config)
        environment.update({name: item.get("value", "from-a-secret") for name, item in env.items()})
        settings = settings_from_env(environment)
        assert settings.port == container["ports"][0]["containerPort"]
        assert settings.host == "0.0.0.0"
        assert settings.data_dir == Path("/data")
        assert (settings.token is None) == settings.insecure
        # every replica, and every broker pod's sidecar, shares its state through the broker
        # when that is RabbitMQ (a Qpid broker's lone replica keeps its own)
        assert settings.shared_state == ("broker" if broker_kind(settings) == "rabbitmq"
                                         else "local")
        management = scenario_values(scenario).get("management", {})
        assert settings.management_url[1:] == management.get("failoverUrls", [])


def test_config_values_reach_flow_sidecar_as_written(rendered: Rendered) -> None:
    config = one(rendered["deployment-pvc-values.yaml"], "ConfigMap")["data"]
    # Helm reads 104857600 as a float; printed as such it would be 1.048576e+08.
    assert config["FLOW_DEFAULT_QUEUE_LIMIT"] == "104857600"
    assert config["FLOW_POLL_INTERVAL"] == "0.5"
    assert config["FLOW_STALE_AFTER"] == "10"
    assert config["FLOW_ON_STALE"] == "stop"
    assert config["FLOW_MANAGEMENT_URL"] == "http://my-rabbit.rabbitmq.svc:15672"


def test_config_names_are_exactly_the_options_the_chart_leaves_open() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    names = set(config["properties"])
    options = {name.replace("_", "-") for name in Settings.model_fields}
    assert names <= options, f"not flow-sidecar options: {names - options}"
    open_options = options - {name.replace("_", "-") for name in CHART_SET | DERIVED}
    assert names == open_options, (
        f"flow-sidecar options missing from values.schema.json: {open_options - names}")


@pytest.mark.parametrize("scenario", ["deployment-pvc-values.yaml", "sidecar-operator-values.yaml"])
def test_clients_reach_flow_sidecar_by_the_service_and_allowed_hosts(
        render: RenderFn, scenario: str,
        settings_from_env: Callable[[dict[str, str]], Settings]) -> None:
    """flow-sidecar refuses Host headers that are not its own: the Service's names, pod
    IPs (probes, Prometheus) and allowedHosts must be."""
    config = one(render(scenario, "allowedHosts[0]=flow.example.com"), "ConfigMap")["data"]
    settings = settings_from_env({**config, "FLOW_TOKEN": "from-a-secret"})
    hosts = HostPolicy(settings.host, settings.allowed_hosts)
    for host in (FULLNAME, f"{FULLNAME}.{NAMESPACE}:8080", f"{FULLNAME}.{NAMESPACE}.svc:8080",
                 f"{FULLNAME}.{NAMESPACE}.svc.cluster.local:8080", "10.1.2.3:8080",
                 "flow.example.com", "localhost:8080"):
        assert hosts.allows(host.encode()), host
    assert not hosts.allows(b"attacker.example:8080")


def test_chart_sets_its_own_options(rendered: Rendered) -> None:
    seen: set[str] = set()
    for docs in rendered.values():
        seen |= set(one(docs, "ConfigMap")["data"])
        for place in placements(docs):
            seen |= {item["name"] for item in place.container["env"]}
    assert {"FLOW_" + name.upper() for name in CHART_SET} <= seen


# Where each scenario's credentials and token come from: (Secret, key), or a plain value.
CHART_SECRET = FULLNAME
SECRET_SOURCES: dict[str, dict[str, tuple[str, str] | str]] = {
    "deployment-pvc-values.yaml": {
        "FLOW_MANAGEMENT_USER": (CHART_SECRET, "management-user"),
        "FLOW_MANAGEMENT_PASSWORD": (CHART_SECRET, "management-password"),
        "FLOW_TOKEN": (CHART_SECRET, "token"),
        "FLOW_PRODUCER_TOKEN": (CHART_SECRET, "producer-token")},
    "deployment-emptydir-values.yaml": {
        "FLOW_MANAGEMENT_USER": (CHART_SECRET, "management-user"),
        "FLOW_MANAGEMENT_PASSWORD": (CHART_SECRET, "management-password"),
        "FLOW_TOKEN": (CHART_SECRET, "token")},
    "deployment-existingsecret-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("my-rabbit-default-user", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-default-user", "password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "token"),
        "FLOW_PRODUCER_TOKEN": ("flow-sidecar-token", "producer-token")},
    "deployment-servicemonitor-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("my-rabbit-default-user", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-default-user", "password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "token")},
    "deployment-ha-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("my-rabbit-default-user", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-default-user", "password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "token")},
    "deployment-insecure-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("my-rabbit-default-user", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-default-user", "password")},
    "deployment-qpid-cpp-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("qpidd-credentials", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("qpidd-credentials", "password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "token")},
    "sidecar-operator-values.yaml": {
        "FLOW_MANAGEMENT_USER": ("my-rabbit-default-user", "username"),
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-default-user", "password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "token")},
    "sidecar-bitnami-values.yaml": {
        "FLOW_MANAGEMENT_USER": "user",
        "FLOW_MANAGEMENT_PASSWORD": ("my-rabbit-rabbitmq", "rabbitmq-password"),
        "FLOW_TOKEN": ("flow-sidecar-token", "api-token")},
}


#: the replica's own address for forwarded credit grants: not a secret (tested below)
ADVERTISED = {"POD_IP", "FLOW_ADVERTISE_URL"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replicas_advertise_their_pod_address(rendered: Rendered, scenario: str) -> None:
    for place in placed(rendered, scenario):
        env = {item["name"]: item for item in place.container["env"]}
        assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["FLOW_ADVERTISE_URL"]["value"] == (
            f"http://$(POD_IP):{place.container['ports'][0]['containerPort']}")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_secret_references(rendered: Rendered, scenario: str) -> None:
    docs = rendered[scenario]
    expected = SECRET_SOURCES[scenario]
    secrets = {doc["metadata"]["name"]: doc for doc in by_kind(docs, "Secret")}
    # The chart creates its Secret exactly when something refers to it.
    uses_chart_secret = any(isinstance(src, tuple) and src[0] == CHART_SECRET
                            for src in expected.values())
    assert set(secrets) == ({CHART_SECRET} if uses_chart_secret else set())
    for place in placed(rendered, scenario):
        env = {item["name"]: item for item in place.container["env"]
               if item["name"] not in ADVERTISED}
        assert set(env) == set(expected), place.where
        for name, source in expected.items():
            if isinstance(source, str):
                assert env[name] == {"name": name, "value": source}
                continue
            ref = env[name]["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == source, (place.where, name)
            if ref["name"] == CHART_SECRET:
                assert ref["key"] in secrets[CHART_SECRET]["data"]
        assert ("checksum/secret" in place.annotations) == uses_chart_secret
    # Secrets stay out of the ConfigMap, whose content anyone with read access sees.
    assert not {"FLOW_TOKEN", "FLOW_PRODUCER_TOKEN", "FLOW_MANAGEMENT_PASSWORD"} & set(
        one(docs, "ConfigMap")["data"])


def test_chart_secret_holds_the_given_values(rendered: Rendered) -> None:
    data = one(rendered["deployment-pvc-values.yaml"], "Secret")["data"]
    decoded = {key: base64.b64decode(value).decode() for key, value in data.items()}
    assert decoded == {"token": "s3cret-token", "producer-token": "s3cret-producers",
                       "management-user": "flow", "management-password": "s3cret-management"}


@pytest.mark.parametrize("assignments, message", [
    ((), "refuses to without a token"),
    (("token.value=t",), "needs credentials"),
    (("token.value=t", "management.password=p"), "set management.user too"),
    (("token.value=t", "management.existingSecret=s", "management.userKey="),
     "set management.user to the broker user name"),
    (("token.value=t", "management.existingSecret=s"), "is loopback"),
    (("token.value=t", "management.existingSecret=s", "mode=sidecar"), "sidecar.podSelector"),
    (("token.value=t", "management.existingSecret=s", "management.url=http://r:15672",
      "persistence.enabled=true"), "a claim is mounted by one pod"),
    (("replicaCount=0",), "replicaCount"),
    (("mode=daemonset",), "mode must be one of"),
    (("config.stale-afterr=5",), "Additional property stale-afterr is not allowed"),
    (("config.token=t",), "Additional property token is not allowed"),
    (("token.value=t", "management.existingSecret=s", "management.url=amqp://q:5672",
      "replicaCount=2"), "has no global parameters for replicas"),
], ids=["no token", "no credentials", "no user", "no user key", "loopback broker",
        "sidecar without selector", "claim with replicas", "no replica", "unknown mode",
        "unknown option", "token in config", "qpid with replicas"])
def test_refused(helm: str, assignments: tuple[str, ...], message: str) -> None:
    result = helm_run(helm, "template", None, *sets(*assignments))
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_a_qpid_cpp_broker_runs_alone_with_local_state(
        rendered: Rendered, settings_from_env: Callable[[dict[str, str]], Settings]) -> None:
    config = one(rendered["deployment-qpid-cpp-values.yaml"], "ConfigMap")["data"]
    settings = settings_from_env({**config, "FLOW_TOKEN": "from-a-secret"})
    assert (broker_kind(settings), settings.shared_state) == ("qpid-cpp", "local")
    assert isinstance(adapter_for(settings), QpidCppAdapter)
    [deployment] = by_kind(rendered["deployment-qpid-cpp-values.yaml"], "Deployment")
    assert deployment["spec"]["replicas"] == 1


# The data volume of each scenario.
CHART_CLAIM = {"persistentVolumeClaim": {"claimName": FULLNAME + "-data"}}
EXISTING_CLAIM = {"persistentVolumeClaim": {"claimName": "flow-sidecar-data"}}
EMPTY_DIR: dict[str, object] = {"emptyDir": {}}
DATA_VOLUMES = {
    "deployment-pvc-values.yaml": CHART_CLAIM,
    "deployment-emptydir-values.yaml": EMPTY_DIR,
    "deployment-existingsecret-values.yaml": EXISTING_CLAIM,
    # Replicas keep an emptyDir cache each: the shared state is in the broker.
    "deployment-servicemonitor-values.yaml": EMPTY_DIR,
    "deployment-insecure-values.yaml": EMPTY_DIR,
    "deployment-ha-values.yaml": EMPTY_DIR,
    # The chart makes no claim for a StatefulSet's pods to share.
    "sidecar-operator-values.yaml": EMPTY_DIR,
    "sidecar-bitnami-values.yaml": EXISTING_CLAIM,
    "deployment-qpid-cpp-values.yaml": CHART_CLAIM,
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_data_volume(rendered: Rendered, scenario: str) -> None:
    for place in placed(rendered, scenario):
        volumes = {volume["name"]: volume for volume in place.volumes}
        data = dict(volumes["flow-sidecar-data"])
        del data["name"]
        assert data == DATA_VOLUMES[scenario], place.where
    claims = by_kind(rendered[scenario], "PersistentVolumeClaim")
    assert [c["metadata"]["name"] for c in claims] == (
        [FULLNAME + "-data"] if DATA_VOLUMES[scenario] is CHART_CLAIM else [])


def test_claim_follows_values(rendered: Rendered) -> None:
    claim = one(rendered["deployment-pvc-values.yaml"], "PersistentVolumeClaim",
                FULLNAME + "-data")
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
                             "resources": {"requests": {"storage": "2Gi"}}}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_service_monitor_only_when_enabled(rendered: Rendered, scenario: str) -> None:
    docs = rendered[scenario]
    wanted = scenario_values(scenario).get("serviceMonitor", {})
    monitors = by_kind(docs, "ServiceMonitor")
    assert len(monitors) == (1 if wanted.get("enabled") else 0)
    for monitor in monitors:
        service = one(docs, "Service")
        assert monitor["spec"]["selector"]["matchLabels"].items() <= \
            service["metadata"]["labels"].items()
        assert monitor["metadata"]["labels"].items() >= wanted["labels"].items()
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"
        assert endpoint["interval"] == wanted["interval"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_service_reaches_the_container(rendered: Rendered, scenario: str) -> None:
    docs = rendered[scenario]
    service = one(docs, "Service")
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == "flow-http"
    # a broker outage fails /readyz, and producers must still get their (stale) answers
    assert service["spec"]["publishNotReadyAddresses"] is True
    if scenario in SIDECAR_SCENARIOS:
        assert service["spec"]["selector"] == scenario_values(scenario)["sidecar"]["podSelector"]
    else:
        pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()


@pytest.mark.parametrize("scenario", SIDECAR_SCENARIOS)
def test_sidecar_mode_renders_the_container_and_no_workload(rendered: Rendered,
                                                            scenario: str) -> None:
    docs = rendered[scenario]
    assert not {doc["kind"] for doc in docs} & {"Deployment", "StatefulSet",
                                                 "PersistentVolumeClaim"}
    operator, sidecars = placed(rendered, scenario)
    # Both snippets add the same container, volumes and rollout annotations.
    assert operator.container == sidecars.container
    assert operator.volumes == sidecars.volumes
    assert operator.annotations == sidecars.annotations
    # The broker is in the same pod (and the cluster's Service, if given, after it).
    urls = one(docs, "ConfigMap")["data"]["FLOW_MANAGEMENT_URL"].split(",")
    assert urls[0] == "http://127.0.0.1:15672"


def settings_lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")}


@pytest.mark.parametrize("scenario", SIDECAR_SCENARIOS)
def test_sidecar_snippets_bring_the_recommended_broker_config(rendered: Rendered,
                                                              scenario: str) -> None:
    """The 1 s statistics settings reach the broker itself, in each chart's own place, and
    are the ones deploy/rabbitmq.conf recommends (its loopback listeners excepted)."""
    [cm] = [d for d in by_kind(rendered[scenario], "ConfigMap")
            if d["metadata"]["name"].endswith("-snippets")]
    operator = yaml.safe_load(cm["data"]["rabbitmqcluster-patch.yaml"])
    bitnami = yaml.safe_load(cm["data"]["bitnami-values.yaml"])
    ours = settings_lines(operator["spec"]["rabbitmq"]["additionalConfig"])
    assert ours == settings_lines(bitnami["extraConfiguration"])
    assert "collect_statistics_interval = 1000" in ours
    recommended = settings_lines((REPO / "deploy" / "rabbitmq.conf").read_text())
    assert ours == {line for line in recommended if "listener" not in line
                    and not line.startswith(("management.tcp", "prometheus.tcp"))}


@pytest.mark.parametrize("scenario", ["deployment-pvc-values.yaml", "sidecar-operator-values.yaml"])
def test_checksums_follow_settings_and_secret(render: RenderFn, scenario: str) -> None:
    def annotations(*assignments: str) -> dict[str, str]:
        return placements(render(scenario, *assignments))[0].annotations

    before = annotations()
    assert annotations() == before
    after_config = annotations("config.stale-after=20")
    assert after_config["checksum/config"] != before["checksum/config"]
    after_token = annotations("token.existingSecret=", "token.value=another")
    assert after_token["checksum/config"] == before["checksum/config"]
    assert after_token.get("checksum/secret") != before.get("checksum/secret")


@pytest.mark.parametrize("scenario", DEPLOYMENT_SCENARIOS)
def test_replicas_roll_without_an_outage(rendered: Rendered, scenario: str) -> None:
    values = scenario_values(scenario)
    spec = one(rendered[scenario], "Deployment")["spec"]
    assert spec["replicas"] == values.get("replicaCount", 2)
    if values.get("persistence", {}).get("enabled"):
        # a claim is mounted by one pod: one replica, replaced rather than rolled
        assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    else:
        assert spec["replicas"] >= 2
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": 0, "maxSurge": 1}}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_disruption_budget_and_anti_affinity_with_several_replicas(
        rendered: Rendered, scenario: str) -> None:
    docs = rendered[scenario]
    budgets = by_kind(docs, "PodDisruptionBudget")
    deployments = by_kind(docs, "Deployment")
    if not deployments or deployments[0]["spec"]["replicas"] < 2:
        assert budgets == []  # a budget on one pod would block every node drain
        for deployment in deployments:
            assert "affinity" not in deployment["spec"]["template"]["spec"]
        return
    [deployment] = deployments
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    [budget] = budgets
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    hard = scenario_values(scenario).get("podAntiAffinity") == "hard"
    [rule] = anti["requiredDuringSchedulingIgnoredDuringExecution" if hard else
                  "preferredDuringSchedulingIgnoredDuringExecution"]
    term = rule if hard else rule["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod_labels.items()


def test_shared_state_options_reach_flow_sidecar(
        rendered: Rendered, settings_from_env: Callable[[dict[str, str]], Settings]) -> None:
    config = one(rendered["deployment-ha-values.yaml"], "ConfigMap")["data"]
    settings = settings_from_env({**config, "FLOW_TOKEN": "t"})
    assert settings.shared_amqp_url == ["my-rabbit.rabbitmq.svc:5672"]
    assert settings.shared_vhost == "flow-sidecar"
    assert len(settings.management_url) == 3
