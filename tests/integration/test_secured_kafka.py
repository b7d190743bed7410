"""kafkacoord on a secured Apache Kafka: SASL_SSL with SCRAM users and ACLs.

The broker is the embedded one with ``secure=True``: it grants kafkacoord's principal
what ``kafkacoord acls`` prints, and an ordinary user only reads the internal topics.
The daemon runs with kafkacoord's client properties file; a node agent, a group member
and a views batch run as the ordinary user, and the CLI with Kafka's
``--command-config`` spelling. A producer with the user's credentials is refused on
``__kc_metadata``, and neither the topic nor the controller's state changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from kafkacoord.client import Bootstrap, KafkaClientConfig, group_member
from kafkacoord.client.admin.controller_admin import read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.storage.clients import admin_client, base_config
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.watermarks import log_end_offsets

from .cluster import DaemonProcess, Replicas, fast_daemon_env, wait_until

pytestmark = pytest.mark.integration

PREFIX = "__kc_"  # what the broker's ACLs name
NODE = 1
ORDERS = "orders"
SHARDS = 3


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("secured") / "kafka", secure=True)
    with broker.start():
        yield broker


def _as(broker: KafkaBroker, user: str) -> Bootstrap:
    properties = broker.data_dir / f"client-{user}.properties"
    return Bootstrap(broker.bootstrap, KafkaClientConfig.load(properties))


def _cli(broker: KafkaBroker, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kafkacoord", *args, "--bootstrap-server",
               broker.bootstrap, "--command-config",
               str(broker.data_dir / "client-kafkacoord.properties")]  # fmt: skip
    env = {**os.environ, "KAFKACOORD_TOPIC_PREFIX": PREFIX,
           "KAFKACOORD_OFFSETS_PARTITIONS": str(SHARDS)}  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False,
                          env=env)  # fmt: skip


@pytest.fixture(scope="module")
def daemon(
    secured: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    env = {
        **fast_daemon_env(secured.bootstrap, PREFIX, SHARDS),
        "KAFKACOORD_KAFKA_CONFIG": str(secured.data_dir / "client-kafkacoord.properties"),
        "KAFKACOORD_NODE_ID": "0",
        "KAFKACOORD_DATA_DIR": str(tmp_path_factory.mktemp("daemon")),
        "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "300",
        "KAFKACOORD_GROUP_CONSUMER_METADATA_REFRESH_MS": "500",
    }
    process = DaemonProcess(env)
    try:
        process.wait_for("daemon ready", timeout_s=120)
        yield process
    finally:
        process.stop()


def test_the_daemon_serves_agents_members_and_the_cli_on_a_secured_cluster(
    secured: KafkaBroker, daemon: DaemonProcess
) -> None:
    user = _as(secured, "user")
    admin = admin_client(_as(secured, "admin"))
    for future in admin.create_topics([NewTopic(ORDERS, 2, 1)]).values():
        future.result(30)

    # A node agent as the ordinary user: it follows __kc_metadata with read rights only.
    agent = NodeAgent(user, node_id=NODE, handler=Replicas(), topic_prefix=PREFIX,
                      heartbeat_interval_ms=500).start(timeout_s=60)  # fmt: skip
    try:
        created = _cli(secured, "topics", "create", "--topic", "svc", "--partitions", "2",
                       "--replication-factor", "1")  # fmt: skip
        assert created.returncode == 0, created.stderr
        listed = _cli(secured, "nodes", "list")
        assert listed.returncode == 0, listed.stderr
        assert str(NODE) in listed.stdout
        image = wait_until(
            lambda: (i := read_metadata(user, f"{PREFIX}metadata")).partition("svc", 1) and i,
            what="svc placed",
        )
        assert image.partition("svc", 0).leader == NODE  # type: ignore[union-attr]

        # A group member as the ordinary user: its commits go through the daemon's batch
        # producer, which authenticates with SCRAM over TLS itself.
        member = group_member(user, "billing", [ORDERS], protocol="consumer",
                              topic_prefix=PREFIX, offsets_partitions=SHARDS,
                              heartbeat_interval_ms=500).start()  # fmt: skip
        try:
            assert member.wait_assigned(60)
            member.commit({(ORDERS, 0): 42, (ORDERS, 1): 7})
            committed = member.committed([(ORDERS, 0), (ORDERS, 1)])
            assert committed == {(ORDERS, 0): 42, (ORDERS, 1): 7}
        finally:
            member.close()
        described = _cli(secured, "groups", "describe", "--group", "billing")
        assert described.returncode == 0, described.stderr
        assert "42" in described.stdout
    finally:
        agent.close()


def test_a_producer_with_a_users_credentials_cannot_write_the_metadata_log(
    secured: KafkaBroker, daemon: DaemonProcess
) -> None:
    kafkacoord = _as(secured, "kafkacoord")
    metadata = f"{PREFIX}metadata"
    wait_until(lambda: read_metadata(kafkacoord, metadata).controller is not None,
               what="a controller")  # fmt: skip
    # An agent another test closed is fenced when its session expires, a metadata write
    # that would move the log's end below: wait for it first.
    wait_until(lambda: all(v.fenced for n, v in read_metadata(kafkacoord, metadata).nodes.items()
                           if n != 0), what="every closed agent fenced")  # fmt: skip
    before = read_metadata(kafkacoord, metadata)
    end_before = log_end_offsets(kafkacoord, {(metadata, 0)})

    forger = Producer(base_config(_as(secured, "user"), "forger", **{"acks": "all"}))
    delivered: list[KafkaError | None] = []
    forger.produce(metadata, b"forged", b"key", 0, on_delivery=lambda e, _: delivered.append(e))
    assert forger.flush(30) == 0
    assert len(delivered) == 1 and delivered[0] is not None
    assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    assert log_end_offsets(kafkacoord, {(metadata, 0)}) == end_before
    after = read_metadata(kafkacoord, metadata)
    assert after.controller_epoch == before.controller_epoch
    assert after.nodes == before.nodes and after.topics == before.topics


def test_clients_without_credentials_are_refused(secured: KafkaBroker) -> None:
    anonymous = admin_client(secured.bootstrap, "anonymous")
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=5)
    wrong = KafkaClientConfig.of(
        {**_as(secured, "user").config.settings,  # type: ignore[union-attr]
         "sasl.jaas.config": 'x.ScramLoginModule required username="user" password="wrong";'}
    )  # fmt: skip
    with pytest.raises(KafkaException):
        admin_client(Bootstrap(secured.bootstrap, wrong), "wrong").list_topics(timeout=10)


@pytest.mark.parametrize("source", ["python", "connector"])
def test_a_views_batch_reads_the_secured_topics_as_the_user(
    secured: KafkaBroker, daemon: DaemonProcess, tmp_path: Path, source: str
) -> None:
    from kafkacoord.spark.views import read_view

    warehouse = tmp_path / "warehouse"
    command = [sys.executable, "-m", "kafkacoord.spark.job", "--bootstrap", secured.bootstrap,
               "--warehouse", str(warehouse), "--prefix", PREFIX, "--available-now",
               "--master", "local[1]", "--source", source, "--kafka-config",
               str(secured.data_dir / "client-user.properties")]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # The group shards are partitions the controller placed: the view has all three.
    rows = read_view(warehouse, "partitions").to_pylist()
    shards = {row["partition"] for row in rows if row["topic"] == f"{PREFIX}offsets"}
    assert shards == {0, 1, 2}, json.dumps(rows, default=str)[:2000]


def test_a_daemon_on_its_own_secured_embedded_kafka_and_the_cli_beside_it(
    tmp_path: Path,
) -> None:
    env = {
        "KAFKACOORD_EMBEDDED_BROKER": "kafka",
        "KAFKACOORD_EMBEDDED_KAFKA_SECURE": "true",
        "KAFKACOORD_DATA_DIR": str(tmp_path / "data"),
        "KAFKACOORD_LOG_FORMAT": "json",
        "KAFKACOORD_METRICS_PORT": "0",
        "KAFKACOORD_LISTEN": "127.0.0.1:0",
        "KAFKACOORD_OFFSETS_PARTITIONS": str(SHARDS),
    }
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("daemon ready", timeout_s=180)

        # The CLI finds the broker and kafkacoord's credentials in the data dir.
        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "kafkacoord", *args],
                                  capture_output=True, text=True, timeout=120,
                                  env={**os.environ, **env}, check=False)  # fmt: skip

        def controller() -> object:
            status = cli("status", "--json")
            assert status.returncode == 0, status.stderr
            return json.loads(status.stdout)["controller"]

        assert wait_until(controller, what="a controller in kafkacoord status")["node_id"] == 0  # type: ignore[index]
        # The controller answers an admin call (there is no node to place a topic on).
        created = cli("topics", "create", "--topic", "t", "--replication-factor", "1")
        assert "larger than the 0 live service nodes" in created.stderr, created.stderr
        anonymous = admin_client((tmp_path / "data" / "bootstrap").read_text(), "anonymous")
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=5)  # the embedded broker itself is secured
    finally:
        daemon.stop()
