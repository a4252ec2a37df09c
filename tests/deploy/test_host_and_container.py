"""The systemd unit and its environment file, the Dockerfile and the compose file: checked with
systemd's own verifier where it is installed, otherwise parsed; nothing here can run Docker, so
the image's settings are checked against flow-sidecar's Settings and its health check is run
against a real HTTP server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from sidecar.config import Settings
from tests.deploy.chart import CHART, FLOW_NAMES, REPO

DEPLOY = REPO / "deploy"
UNIT = DEPLOY / "flow-sidecar.service"
ENV_FILE = DEPLOY / "flow-sidecar.env"
SECRET_NAMES = {"FLOW_TOKEN", "FLOW_PRODUCER_TOKEN", "FLOW_MANAGEMENT_PASSWORD"}

SettingsFromEnv = Callable[[dict[str, str]], Settings]


def unit_entries() -> dict[str, list[tuple[str, str]]]:
    """The unit as systemd reads it: sections of (key, value), keys may repeat."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = []
        else:
            key, _, value = line.partition("=")
            sections[current].append((key.strip(), value.strip()))
    return sections


def service(key: str) -> list[str]:
    return [value for k, value in unit_entries()["Service"] if k == key]


def env_file_assignments() -> dict[str, str]:
    """Active NAME=value lines of deploy/flow-sidecar.env."""
    found = {}
    for line in ENV_FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            found[name] = value
    return found


def test_unit_is_hardened_and_keeps_state_in_its_state_directory() -> None:
    assert service("DynamicUser") == ["yes"]
    assert service("NoNewPrivileges") == ["yes"]
    assert service("ProtectSystem") == ["strict"]
    assert service("CapabilityBoundingSet") == [""]
    [state] = service("StateDirectory")
    assert service("EnvironmentFile") == ["/etc/flow-sidecar/flow-sidecar.env",
                                          "/etc/flow-sidecar/secrets.env"]
    [exec_start] = service("ExecStart")
    command, *flags = exec_start.split()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert Path(command).name in scripts
    assert flags == [f"--data-dir=%S/{state}"]  # a flag: no environment file overrides it


def test_unit_gives_the_sidecar_a_core_before_the_broker() -> None:
    """systemd's default weight is 100, the broker's unit's too."""
    [weight] = service("CPUWeight")
    assert int(weight) > 100


def test_unit_does_not_restart_on_refused_options() -> None:
    """RestartPreventExitStatus must be the status flow-sidecar exits with when it refuses
    its options: here, a non-loopback listener without a token."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLOW_")}
    result = subprocess.run([str(Path(sys.executable).parent / "flow-sidecar"),
                             "--listen", "0.0.0.0:8080"],
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "--token" in result.stderr
    assert service("RestartPreventExitStatus") == [str(result.returncode)]


@pytest.fixture
def installable_unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this virtualenv's flow-sidecar, because
    systemd-analyze checks that the command exists."""
    flow_sidecar = Path(sys.executable).parent / "flow-sidecar"
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={flow_sidecar}", UNIT.read_text(),
                  flags=re.MULTILINE)
    path = tmp_path / UNIT.name
    path.write_text(text)
    return path


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.skip("systemd-analyze is not installed; the unit is checked by parsing only")
    return path


def test_systemd_verify(installable_unit: Path) -> None:
    result = subprocess.run([systemd_analyze(), "verify", str(installable_unit)],
                            capture_output=True, text=True, timeout=60, check=False)
    # Unknown keys and bad values are only warnings (exit status 0): any output is a failure.
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_systemd_security_exposure_is_low(installable_unit: Path) -> None:
    result = subprocess.run([systemd_analyze(), "security", "--offline=yes",
                             str(installable_unit)],
                            capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Overall exposure level for \S+: ([\d.]+)", result.stdout + result.stderr)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= 2.0, result.stdout


def test_env_file_documents_every_option_and_holds_no_secrets(
        settings_from_env: SettingsFromEnv) -> None:
    mentioned = set(re.findall(r"^#?(FLOW_[A-Z_]+)=", ENV_FILE.read_text(), flags=re.MULTILINE))
    assert mentioned <= FLOW_NAMES, f"flow-sidecar has no such options: {mentioned - FLOW_NAMES}"
    # The unit sets the data directory; secrets belong in secrets.env.
    missing = FLOW_NAMES - mentioned - SECRET_NAMES - {"FLOW_DATA_DIR"}
    assert not missing, f"options missing from deploy/flow-sidecar.env: {missing}"
    active = env_file_assignments()
    assert not SECRET_NAMES & set(active)
    # With the unit's data directory and the secrets file, flow-sidecar accepts it, and
    # every commented line, uncommented, is the option's default.
    commented = dict(re.findall(r"^#(FLOW_[A-Z_]+)=(.*)$", ENV_FILE.read_text(),
                                flags=re.MULTILINE))
    settings = settings_from_env({**active, **commented, "FLOW_DATA_DIR": "/var/lib/flow-sidecar",
                                  "FLOW_MANAGEMENT_PASSWORD": "from-secrets-env"})
    assert settings.host == "127.0.0.1"
    for name in commented:
        field = Settings.model_fields[name.removeprefix("FLOW_").lower()]
        if field.default is not None:
            assert getattr(settings, name.removeprefix("FLOW_").lower()) == field.default, name


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """deploy/Dockerfile as (INSTRUCTION, arguments) per stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), args.strip()))
    return stages


def final_stage(instruction: str) -> list[str]:
    return [args for name, args in dockerfile_stages()[-1] if name == instruction]


def image_env() -> dict[str, str]:
    [env] = final_stage("ENV")
    return dict(item.split("=", 1) for item in env.split())


def test_image_runs_as_the_chart_user() -> None:
    assert all(stage[0] == ("FROM", stage[0][1]) and stage[0][1].startswith("python:3.11-slim")
               for stage in dockerfile_stages())
    user = final_stage("USER")[-1]
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    chart = yaml.safe_load((CHART / "values.yaml").read_text())
    for context in (chart["securityContext"], chart["podSecurityContext"]):
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)


def test_image_settings(settings_from_env: SettingsFromEnv) -> None:
    env = image_env()
    assert {k for k in env if k.startswith("FLOW_")} <= FLOW_NAMES
    assert final_stage("VOLUME") == [env["FLOW_DATA_DIR"]]
    assert final_stage("ENTRYPOINT") == ['["flow-sidecar"]']
    flow = {k: v for k, v in env.items() if k.startswith("FLOW_")}
    # The image listens on all addresses, so it starts only with a token.
    with pytest.raises(ValueError, match="--token"):
        settings_from_env(flow)
    settings = settings_from_env({**flow, "FLOW_TOKEN": "t"})
    assert final_stage("EXPOSE") == [str(settings.port)]


def test_image_contains_every_package() -> None:
    """The build stage copies what pyproject.toml packages and the client distribution
    (client/, which the server depends on), and the context lets them through."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}
    copied = {source for name, args in dockerfile_stages()[0] if name == "COPY"
              for source in args.split()[:-1]}
    assert packages | {"pyproject.toml", "README.md", "client"} == copied
    allowed = {line[1:].rstrip("/") for line in
               (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")}
    assert copied == allowed


def test_image_carries_the_qpid_proton_binding() -> None:
    """--broker qpid-cpp needs Proton's Python binding: the build stage wheels the version
    pyproject's `qpid` extra pins (source only on PyPI: a compiler is installed there, and
    only there), and the final stage installs every wheel it made."""
    [pinned] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["qpid"]
    build = " ".join(args for name, args in dockerfile_stages()[0] if name == "RUN")
    assert f'pip wheel --no-cache-dir --wheel-dir /wheels "{pinned}"' in build
    assert "gcc" in build and "libssl-dev" in build
    final = " ".join(final_stage("RUN"))
    assert "pip install --no-cache-dir --disable-pip-version-check /wheels/*.whl" in final
    assert "gcc" not in final


class Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status, healthy", [(200, True), (503, False)])
def test_image_health_check(health_server: ThreadingHTTPServer, status: int,
                            healthy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The HEALTHCHECK command itself, run against a server on FLOW_LISTEN's port."""
    [healthcheck] = final_stage("HEALTHCHECK")
    command = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert command[0] == "python"
    monkeypatch.setattr(Health, "status", status)
    port = health_server.server_address[1]
    result = subprocess.run([sys.executable, *command[1:]], capture_output=True, timeout=30,
                            env={**os.environ, "FLOW_LISTEN": f"0.0.0.0:{port}"}, check=False)
    assert (result.returncode == 0) == healthy, result.stderr


def compose() -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def rabbitmq_conf() -> dict[str, str]:
    settings = {}
    for line in (DEPLOY / "rabbitmq.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def test_compose_runs_the_sidecar_in_the_brokers_network(
        settings_from_env: SettingsFromEnv) -> None:
    services = compose()["services"]
    assert isinstance(services, dict)
    broker, sidecar = services["rabbitmq"], services["flow-sidecar"]
    assert broker["image"] == "rabbitmq:3-management"
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in broker["volumes"]
                  if volume.startswith("./"))
    conf_target = mounts["./rabbitmq.conf"]
    assert (DEPLOY / "rabbitmq.conf").is_file() and conf_target.startswith("/etc/rabbitmq/conf.d/")
    # The AMQP override must come after deploy/rabbitmq.conf to win.
    [override] = broker["configs"]
    assert Path(override["target"]).parent == Path(conf_target).parent
    assert Path(override["target"]).name > Path(conf_target).name

    assert (DEPLOY / sidecar["build"]["context"] / sidecar["build"]["dockerfile"]).resolve() == \
        DEPLOY / "Dockerfile"
    assert sidecar["network_mode"] == "service:rabbitmq"
    assert sidecar["read_only"] is True and sidecar["cap_drop"] == ["ALL"]
    env = sidecar["environment"]
    assert set(env) <= FLOW_NAMES
    assert env["FLOW_TOKEN"].startswith("${FLOW_TOKEN:?")

    # Settings as the container gets them: the image's, then compose's, token filled in.
    settings = settings_from_env({**{k: v for k, v in image_env().items()
                                     if k.startswith("FLOW_")},
                                  **env, "FLOW_TOKEN": "t"})
    # The management API is on loopback (deploy/rabbitmq.conf), shared through network_mode.
    conf = rabbitmq_conf()
    assert settings.management_url == [
        f"http://{conf['management.tcp.ip']}:{conf['management.tcp.port']}"]
    published = {port.rsplit(":", 1)[1] for port in broker["ports"]}
    assert {str(settings.port), "5672"} <= published
    assert settings.data_dir in {Path(v.split(":")[1]) for v in sidecar["volumes"]}
