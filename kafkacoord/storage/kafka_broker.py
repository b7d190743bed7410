"""Launch Apache Kafka as the embedded broker: one KRaft node, broker and controller in one JVM.

Unlike tansu's ``memory://`` broker its topics live on disk under ``data_dir`` and survive a
restart. ``python -m kafkacoord.storage.kafka_broker --data-dir DIR`` runs one in the
foreground (``./dev.sh kafka``; ``--secure`` for SASL_SSL and ACLs, see :mod:`.kafka_security`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import NoReturn

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .acls import acl_bindings, kafkacoord_acls
from .broker import free_port
from .child import owned_child_kwargs, stop_child
from .clients import base_config
from .errors import EmbeddedBrokerError
from .kafka_certs import write_private
from .kafka_config import Bootstrap
from .kafka_jars import KAFKA_VERSION, java_binary, kafka_classpath
from .kafka_security import ADMIN, KAFKACOORD, USER, USERS, KafkaSecurity, properties_file

log = structlog.get_logger(__name__)

# Sized for a small shared machine (2 cores): the broker idles at a few hundred MiB.
_JVM_OPTS = (
    "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
)  # fmt: skip
# The format tool runs once per data dir and briefly: start fast, stay small.
_TOOL_OPTS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    <File name="file" fileName="{path}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="{level}"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def new_cluster_id() -> str:
    """A Kafka ``Uuid`` string: 16 random bytes, URL-safe base64, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` from /proc (None where there is no /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


class KafkaBroker:
    """An Apache Kafka broker on 127.0.0.1, its log dir under ``data_dir/logs``.

    The storage is formatted on the first start only; later starts reuse the log dir and
    every topic in it. The quorum is static (``controller.quorum.voters``), so each start
    may pick new free ports. Broker output goes to ``log_path`` (WARN unless ``log_level``).

    ``secure``: a SASL_SSL listener, SCRAM users and the ACLs ``kafkacoord acls`` prints for
    the internal topics named ``topic_prefix*`` (:mod:`.kafka_security`). A log dir keeps
    the security it was formatted with.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        log_path: Path | str | None = None,
        host: str = "127.0.0.1",
        log_level: str = "WARN",
        version: str = KAFKA_VERSION,
        properties: Mapping[str, str] | None = None,
        secure: bool = False,
        topic_prefix: str = "__kc_",
    ) -> None:
        # Absolute: the JVM's config names files, and a file URI cannot be relative.
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self.port = port or free_port(host)
        self.controller_port = controller_port or free_port(host)
        self.log_path = Path(log_path).absolute() if log_path else self.data_dir / "kafka.log"
        self.log_level = log_level
        self.version = version
        # Broker properties over the defaults (tests force the log cleaner this way).
        self.properties = dict(properties or {})
        self.secure = secure
        self.topic_prefix = topic_prefix
        # Set by start() when secure: the users, passwords and PEM files.
        self.security: KafkaSecurity | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def cluster_id(self) -> str | None:
        """The id stored in ``meta.properties`` when the log dir was formatted."""
        meta = self.log_dir / "meta.properties"
        if not meta.is_file():
            return None
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.partition("=")[2].strip()
        return None

    def start(self, timeout_s: float = 90.0) -> KafkaBroker:
        java = java_binary()
        classpath = kafka_classpath(self.version)  # the first call resolves the jars
        started = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        formatted = self.cluster_id is not None
        self.security = self._security(formatted)
        config = self._write_config()
        log4j = f"-Dlog4j2.configurationFile={self._write_log4j2().as_uri()}"
        if not formatted:
            self._format(java, classpath, log4j, config)
        # java itself is the child (no wrapper script), so the parent-death signal reaches it.
        with self.log_path.open("ab") as out:
            self._process = subprocess.Popen(
                [java, *_JVM_OPTS, log4j, "-cp", classpath, "kafka.Kafka", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                **owned_child_kwargs(),
            )
        self._wait_ready(timeout_s)
        if self.security is not None:
            self._apply_acls(self.security, timeout_s)
            self.security.write_client_properties()
        assert self._process is not None
        log.info(
            "embedded broker ready",
            bootstrap=self.bootstrap,
            pid=self.pid,
            log=str(self.log_path),
            seconds=round(time.monotonic() - started, 2),
            rss_mb=rss_mb(self._process.pid),
            secure=self.secure,
        )
        return self

    def _security(self, formatted: bool) -> KafkaSecurity | None:
        found = KafkaSecurity.load(self.data_dir)
        if formatted and (found is not None) != self.secure:
            raise EmbeddedBrokerError(
                f"the Kafka log dir {self.log_dir} was formatted "
                f"{'with' if found else 'without'} security; start it "
                f"{'with' if found else 'without'} secure (--secure), or use a new data dir"
            )
        if not self.secure:
            return None
        # An unformatted dir with users is a format that failed: its users are reused.
        return found or KafkaSecurity.create(self.data_dir)

    def bootstrap_as(self, user: str = ADMIN) -> Bootstrap:
        """This broker's bootstrap, reached as ``user`` (secure) or anonymously."""
        config = None if self.security is None else self.security.client_config(user)
        return Bootstrap(self.bootstrap, config)

    def _apply_acls(self, security: KafkaSecurity, timeout_s: float) -> None:
        """The ACLs ``kafkacoord acls`` prints for kafkacoord's user and ``user`` as a reader."""
        acls = kafkacoord_acls(f"User:{KAFKACOORD}", [f"User:{USER}"], self.topic_prefix)
        admin = AdminClient(base_config(self.bootstrap_as(ADMIN), "kafkacoord-acls"))
        for future in admin.create_acls(acl_bindings(acls), request_timeout=timeout_s).values():
            try:
                future.result()
            except KafkaException as exc:
                self.stop()
                raise EmbeddedBrokerError(f"applying kafkacoord's ACLs failed: {exc}") from exc

    def _write_config(self) -> Path:
        voter = f"{self.host}:{self.controller_port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{voter}",
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{voter}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
            "num.recovery.threads.per.data.dir": "2",
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "group.initial.rebalance.delay.ms": "0",
            # A daemon may run its controller-election group with sessions shorter than
            # Kafka's 6 s floor, for fast failover (the tests use 3 s).
            "group.min.session.timeout.ms": "1000",
            # kafkacoord creates its own topics with the configs they need.
            "auto.create.topics.enable": "false",
        }
        if self.security is not None:
            settings.update(self.security.server_properties(self.bootstrap, voter))
        settings.update(self.properties)
        path = self.data_dir / "server.properties"
        text = "".join(f"{key}={value}\n" for key, value in settings.items())
        # Secure, it holds the admin password (the broker's inter-broker login).
        write_private(path, text.encode())
        return path

    def _write_log4j2(self) -> Path:
        path = self.data_dir / "log4j2.xml"
        path.write_text(_LOG4J2.format(path=self.log_path, level=self.log_level))
        return path

    def _format(self, java: str, classpath: str, log4j: str, config: Path) -> None:
        cluster_id = new_cluster_id()
        cmd = [
            java, *_TOOL_OPTS, log4j, "-cp", classpath, "kafka.tools.StorageTool",
            "format", "--cluster-id", cluster_id, "--config", str(config), "--ignore-formatted",
            *(self.security.format_args() if self.security else ()),
        ]  # fmt: skip
        done = subprocess.run(
            cmd, capture_output=True, text=True, check=False, **owned_child_kwargs()
        )
        if done.returncode != 0:
            raise EmbeddedBrokerError(
                f"formatting the Kafka log dir {self.log_dir} failed "
                f"(exit {done.returncode}): {(done.stdout + done.stderr).strip()[-2000:]}"
            )
        log.info("formatted kafka log dir", log_dir=str(self.log_dir), cluster_id=cluster_id)

    def _wait_ready(self, timeout_s: float) -> None:
        """Ready when the broker answers a metadata request naming itself, not at first TCP."""
        deadline = time.monotonic() + timeout_s
        # A connection first: librdkafka would log every refused attempt before that.
        while not self._accepts_connections():
            if time.monotonic() > deadline:
                self._not_ready(timeout_s)
            time.sleep(0.1)
        config = base_config(self.bootstrap_as(ADMIN), "kafkacoord-readiness")
        admin = AdminClient({**config, "reconnect.backoff.max.ms": 200})
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(KafkaException):
                if admin.list_topics(timeout=1.0).brokers:
                    return
        self._not_ready(timeout_s)

    def _accepts_connections(self) -> bool:
        self._check_alive()
        try:
            with socket.create_connection((self.host, self.port), 0.2):
                return True
        except OSError:
            return False

    def _not_ready(self, timeout_s: float) -> NoReturn:
        self.stop()
        raise EmbeddedBrokerError(
            f"embedded Kafka broker not ready after {timeout_s}s; see {self.log_path}"
        )

    def _check_alive(self) -> None:
        assert self._process is not None
        if self._process.poll() is None:
            return
        code, self._process = self._process.returncode, None
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-5:])
        raise EmbeddedBrokerError(
            f"embedded Kafka broker exited with {code}; see {self.log_path}:\n{tail}"
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        process, self._process = self._process, None
        # SIGTERM first: a controlled shutdown leaves the broker's log dir clean.
        if stop_child(process, timeout_s):
            log.info("embedded broker stopped", bootstrap=self.bootstrap)

    def __enter__(self) -> KafkaBroker:
        return self.start() if self._process is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Run one broker in the foreground until SIGINT or SIGTERM, for tests and benches."""
    parser = argparse.ArgumentParser(prog="python -m kafkacoord.storage.kafka_broker")
    parser.add_argument("--data-dir", type=Path, default=Path("var/kafka"))
    parser.add_argument("--port", type=int, default=None, help="broker port (default: free)")
    parser.add_argument("--log-level", default="WARN", help="the broker's log4j2 level")
    parser.add_argument(
        "--secure", action="store_true",
        help="SASL_SSL listener, SCRAM users and ACLs; client properties files in the data dir",
    )  # fmt: skip
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        broker = KafkaBroker(
            args.data_dir, port=args.port, log_level=args.log_level, secure=args.secure
        ).start()
    except EmbeddedBrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bootstrap_file = args.data_dir / "bootstrap"
    bootstrap_file.write_text(broker.bootstrap)
    print(f"Apache Kafka {broker.version} at {broker.bootstrap} (written to {bootstrap_file});")
    print(f"  KAFKACOORD_KAFKA_BOOTSTRAP={broker.bootstrap}; Ctrl-C stops it", flush=True)
    if broker.security is not None:
        print(f"  SASL_SSL (SCRAM-SHA-512), CA {broker.security.ca_path}; client properties:")
        for user in USERS:
            print(f"    {broker.data_dir / properties_file(user)}", flush=True)
    try:
        while not stop.wait(1.0):
            if not broker.running:
                print(f"error: the broker exited; see {broker.log_path}", file=sys.stderr)
                return 1
    finally:
        broker.stop()
        bootstrap_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
