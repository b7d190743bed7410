"""The embedded Apache Kafka broker: a real JVM, real topics, no orphans, clear errors."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kafkacoord.storage.broker import free_port
from kafkacoord.storage.errors import EmbeddedBrokerError
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_jars import HOME_ENV, java_binary, java_major, kafka_classpath

from .cluster import DaemonProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def create_compacted(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(timeout=60)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for key, value in records:
        producer.produce(topic, value, key, on_delivery=on_delivery)
    assert producer.flush(60) == 0, "every record acknowledged"
    assert failures == []


def consume_all(bootstrap: str, topic: str, partitions: int = 2) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[tuple[bytes, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            records.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(at_end) == partitions, "every partition read to its end"
    return records


def test_compacted_topic_round_trip(kafka_bootstrap: str, prefix: str) -> None:
    topic = f"{prefix}compacted"
    create_compacted(kafka_bootstrap, topic)
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(100)]
    produce(kafka_bootstrap, topic, records)

    assert sorted(consume_all(kafka_bootstrap, topic)) == sorted(records)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"


def test_restart_on_the_same_log_dir_keeps_topics_and_records(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    topic = "kept"
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    with KafkaBroker(data_dir) as first:
        cluster_id = first.cluster_id
        create_compacted(first.bootstrap, topic)
        produce(first.bootstrap, topic, records)
        old_ports = {first.port, first.controller_port}

    # New ports for both listeners: the quorum is static, so nothing stored names them.
    port, controller_port = _ports_other_than(old_ports)
    with KafkaBroker(data_dir, port=port, controller_port=controller_port) as second:
        assert second.cluster_id == cluster_id, "not reformatted"
        assert sorted(consume_all(second.bootstrap, topic)) == sorted(records)


def _ports_other_than(taken: set[int]) -> tuple[int, int]:
    ports: list[int] = []
    while len(ports) < 2:
        port = free_port()
        if port not in taken and port not in ports:
            ports.append(port)
    return ports[0], ports[1]


_PARENT = """
import sys, time
from pathlib import Path
from kafkacoord.storage.broker import EmbeddedBroker
from kafkacoord.storage.kafka_broker import KafkaBroker

kind, workdir = sys.argv[1], Path(sys.argv[2])
if kind == "kafka":
    broker = KafkaBroker(workdir / "kafka").start()
else:
    broker = EmbeddedBroker(log_path=workdir / "tansu.log").start()
print(f"BROKER_PID {broker.pid}", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_the_broker_dies_with_a_killed_parent(kind: str, tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, kind, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    try:
        broker_pid = _read_broker_pid(parent, deadline=time.monotonic() + 120)
        assert _alive(broker_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        assert _wait_for(lambda: not _alive(broker_pid), timeout_s=30), (
            f"{kind} broker {broker_pid} outlived its parent"
        )
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _read_broker_pid(parent: subprocess.Popen[bytes], deadline: float) -> int:
    """The pid the parent prints once its broker is ready (raw reads: select sees every byte)."""
    assert parent.stdout is not None
    fd = parent.stdout.fileno()
    output = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            break
        output += chunk
        for line in output.splitlines():
            if line.startswith(b"BROKER_PID "):
                return int(line.split()[1])
    raise AssertionError(f"the parent did not start its broker: {output.decode(errors='replace')}")


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    tick = threading.Event()  # never set: its wait is an interruptible poll interval
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        tick.wait(0.05)
    return True


def _fake_java(bin_dir: Path, version: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
    java.chmod(0o755)


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EmbeddedBrokerError, match="needs java") as caught:
        KafkaBroker(tmp_path / "kafka").start()
    assert "apt-get install openjdk-17-jre-headless" in str(caught.value)


def test_java_older_than_17_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_java(tmp_path / "bin", "11.0.22")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EmbeddedBrokerError, match=r"Java 17 or newer.*is Java 11"):
        java_binary()
    assert java_major(str(tmp_path / "bin" / "java")) == 11


def test_missing_maven_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_java(tmp_path / "bin", "17.0.15")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "jars"))
    with pytest.raises(EmbeddedBrokerError, match=r"needs Maven \(mvn\)") as caught:
        kafka_classpath()
    assert "apt-get install maven" in str(caught.value)


def test_the_daemon_runs_on_its_own_kafka_broker_and_stops_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    env = {
        "KAFKACOORD_BOOTSTRAP": "",  # unset: the embedded broker
        "KAFKACOORD_EMBEDDED_BROKER": "kafka",
        "KAFKACOORD_DATA_DIR": str(data_dir),
        "KAFKACOORD_OFFSETS_PARTITIONS": "4",
        "KAFKACOORD_METRICS_PORT": "-1",
        "KAFKACOORD_LOG_FORMAT": "json",
    }
    daemon = DaemonProcess(env)
    try:
        broker = daemon.wait_for("embedded broker ready", timeout_s=120)
        assert broker["rss_mb"] > 0 and broker["seconds"] > 0
        ready = daemon.wait_for("daemon ready")
        assert ready["shards"] == 5
        assert (data_dir / "bootstrap").read_text() == broker["bootstrap"]
        assert (data_dir / "kafka" / "logs" / "meta.properties").is_file()
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.process.wait(60) == 0
        assert not _alive(broker["pid"]), "the daemon stopped its broker"
    finally:
        daemon.stop()
