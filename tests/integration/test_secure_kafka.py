"""The secured embedded Apache Kafka: SASL_SSL, SCRAM users, and the ACLs ``kafkacoord acls``
prints, proven sufficient for kafkacoord's principal and for readers, and no more."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import stat
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from cryptography import x509
from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.storage.acls import Acl, Resource, kafkacoord_acls
from kafkacoord.storage.errors import EmbeddedBrokerError
from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_config import KafkaClientConfig
from kafkacoord.storage.kafka_jars import java_binary, kafka_classpath
from tests.kafka_acls import parse_commands

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with KafkaBroker(tmp_path_factory.mktemp("secure-kafka"), secure=True) as started:
        yield started


def librdkafka(path: Path) -> dict[str, str]:
    """A Kafka client properties file as librdkafka settings, as kafkacoord reads it."""
    return KafkaClientConfig.load(path).librdkafka()


def config(broker: KafkaBroker, user: str, **extra: Any) -> dict[str, Any]:
    path = broker.data_dir / f"client-{user}.properties"
    return {"bootstrap.servers": broker.bootstrap, **librdkafka(path), **extra}


def topic_name() -> str:
    return f"__kc_t{uuid.uuid4().hex[:8]}_metadata"


def create(admin: AdminClient, *topics: str, partitions: int = 1) -> None:
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
    for future in futures.values():
        future.result(timeout=30)


def alter_config(admin: AdminClient, topic: str, key: str, value: str) -> None:
    change = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[change])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return int(exc.args[0].code())


def produce(producer: Producer, topic: str, count: int) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode(),
                         on_delivery=lambda err, _msg: results.append(err))  # fmt: skip
    assert producer.flush(30) == 0
    return results


def read(
    cfg: dict[str, Any], topic: str, group: str, until: int
) -> tuple[list[bytes], list[KafkaError]]:
    """Every committed record of partition 0, as an assign-only consumer in ``group``, once its
    end is at ``until`` or past it. The wait matters after a transaction: Kafka answers EndTxn
    before its markers are written, so until then the last stable offset stays at the
    transaction's first record and the consumer meets an early end."""
    consumer = Consumer({**cfg, "group.id": group, "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    errors: list[KafkaError] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg: Message | None = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                if msg.offset() < until:
                    continue
                # A short wait after the end: a denied coordinator lookup surfaces in it.
                extra = consumer.poll(1.0)
                if extra is not None and extra.error() is not None:
                    errors.append(extra.error())
                return values, errors
            if error is not None:
                errors.append(error)
            else:
                values.append(msg.value() or b"")
    finally:
        consumer.close()
    raise AssertionError(f"no end of {topic} within 30 s; errors: {errors}")


def log_end(broker: KafkaBroker, topic: str) -> int:
    consumer = Consumer(config(broker, "kafkacoord", **{"group.id": "kafkacoord-0-probe"}))
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    return int(high)


def test_the_data_dir_holds_the_ca_and_client_properties(broker: KafkaBroker) -> None:
    d = broker.data_dir
    for user in ("admin", "kafkacoord", "user"):
        props = d / f"client-{user}.properties"
        assert stat.S_IMODE(props.stat().st_mode) == 0o600
        text = props.read_text()
        assert "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" in text
        assert f'username="{user}"' in text and f"ssl.truststore.location={d / 'ca.pem'}" in text
    for secret in ("scram-users.json", "server-keystore.pem", "server.properties"):
        assert stat.S_IMODE((d / secret).stat().st_mode) == 0o600, secret
    assert "BEGIN PRIVATE KEY" in (d / "server-keystore.pem").read_text()  # PKCS#8
    assert not list(d.glob("*ca*key*")), "the CA's key is not kept"
    cert = x509.load_pem_x509_certificates((d / "server-keystore.pem").read_bytes())[0]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]


def test_kafkacoords_principal_creates_writes_and_reads_its_topics(broker: KafkaBroker) -> None:
    kc = config(broker, "kafkacoord")
    admin = AdminClient(kc)
    metadata, offsets = topic_name(), topic_name().replace("metadata", "offsets")
    create(admin, metadata)
    create(admin, offsets, partitions=2)
    idempotent = Producer({**kc, "enable.idempotence": True, "acks": "all"})
    assert produce(idempotent, offsets, 5) == [None] * 5
    transactional = Producer({**kc, "transactional.id": "__kc_controller"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    produce(transactional, metadata, 3)
    transactional.commit_transaction(30)

    values, errors = read(kc, metadata, "kafkacoord-0-loader-replay", until=3)
    assert values == [b"v0", b"v1", b"v2"] and errors == []
    # The admin calls the daemon makes on its topics: configs, partitions, deletion.
    resource = ConfigResource(ConfigResource.Type.TOPIC, offsets)
    alter_config(admin, offsets, "retention.ms", "3600000")
    assert (
        admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "3600000"
    )
    admin.create_partitions([NewPartitions(offsets, 3)])[offsets].result(30)
    assert len(admin.describe_cluster().result(30).nodes) == 1
    admin.delete_topics([offsets])[offsets].result(30)


def test_kafkacoord_describes_users_topics_and_joins_its_election_group(
    broker: KafkaBroker,
) -> None:
    users_topic = f"orders-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(config(broker, "admin"))
    create(admin, users_topic, partitions=3)
    produce(Producer(config(broker, "admin")), users_topic, 4)
    kc = config(broker, "kafkacoord")
    # Partition counts and log ends of a user's topic (Describe on every topic).
    assert (
        len(AdminClient(kc).list_topics(users_topic, timeout=30).topics[users_topic].partitions)
        == 3
    )
    consumer = Consumer({**kc, "group.id": "kafkacoord-0-probe"})
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition(users_topic, p), 30)[1] for p in range(3)
        ]
    finally:
        consumer.close()
    assert sum(ends) == 4

    metadata = topic_name()
    create(AdminClient(kc), metadata)
    elected = join_group(kc, metadata, f"__kc_controller-{uuid.uuid4().hex[:6]}")
    assert elected == [0]


def join_group(cfg: dict[str, Any], topic: str, group: str) -> list[int]:
    """Subscribe as the controller election does; the partitions assigned, or raise."""
    assigned: list[int] = []
    consumer = Consumer({**cfg, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 6000})  # fmt: skip
    consumer.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(p.partition for p in ps))
    deadline = time.monotonic() + 30
    try:
        while not assigned and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            error = None if msg is None else msg.error()
            # A topic just created may not be in every broker's metadata yet: the election
            # polls on through that, as here; any other error (a refusal) is the answer.
            if error is not None and error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaException(error)
    finally:
        consumer.close()
    return assigned


def test_an_ordinary_user_cannot_write_the_metadata_topic(broker: KafkaBroker) -> None:
    metadata = topic_name()
    create(AdminClient(config(broker, "kafkacoord")), metadata)
    before = log_end(broker, metadata)

    results = produce(Producer(config(broker, "user", acks="all")), metadata, 3)
    assert [r.code() if r else None for r in results] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert log_end(broker, metadata) == before == 0, "nothing was appended"
    # Nor may it take the controller's transactional id and fence the controller.
    thief = Producer(config(broker, "user", **{"transactional.id": "__kc_controller"}))
    with pytest.raises(KafkaException) as denied:
        thief.init_transactions(30)
    assert error_code(denied.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_reader_reads_the_metadata_topic_and_cannot_alter_it(broker: KafkaBroker) -> None:
    metadata = topic_name()
    kc = config(broker, "kafkacoord")
    create(AdminClient(kc), metadata)
    produce(Producer({**kc, "enable.idempotence": True}), metadata, 2)
    user = config(broker, "user")

    # As a client's metadata follower does: assign-only, in a group it never joins.
    values, errors = read(user, metadata, f"kc-routes-{uuid.uuid4().hex[:8]}-metadata", until=2)
    assert values == [b"v0", b"v1"]
    assert errors == [], "no GROUP_AUTHORIZATION_FAILED: the group's Describe ACL suffices"

    admin = AdminClient(user)
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as deleting:
        admin.delete_topics([metadata])[metadata].result(30)
    assert error_code(deleting.value) == denied
    with pytest.raises(KafkaException) as growing:
        admin.create_partitions([NewPartitions(metadata, 2)])[metadata].result(30)
    assert error_code(growing.value) == denied
    with pytest.raises(KafkaException) as altering:
        alter_config(admin, metadata, "retention.ms", "1")
    assert error_code(altering.value) == denied
    with pytest.raises(KafkaException) as creating:
        create(admin, topic_name())
    assert error_code(creating.value) == denied
    # Nor may it join the controller election.
    with pytest.raises(KafkaException) as joining:
        join_group(user, metadata, f"__kc_controller-{uuid.uuid4().hex[:6]}")
    assert error_code(joining.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert log_end(broker, metadata) == 2


@pytest.mark.parametrize(
    ("how", "reported"),
    [
        ("plaintext", KafkaError._ALL_BROKERS_DOWN),
        ("TLS without SASL", KafkaError._ALL_BROKERS_DOWN),
        ("bad password", KafkaError._AUTHENTICATION),
        ("untrusted server", KafkaError._SSL),
    ],
)
def test_unauthenticated_clients_are_refused(broker: KafkaBroker, how: str, reported: int) -> None:
    cfg = config(broker, "kafkacoord")
    if how == "plaintext":
        cfg = {"bootstrap.servers": broker.bootstrap}
    elif how == "TLS without SASL":
        cfg = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
               "ssl.ca.location": cfg["ssl.ca.location"]}  # fmt: skip
    elif how == "bad password":
        cfg["sasl.password"] = "not-" + cfg["sasl.password"]
    else:
        del cfg["ssl.ca.location"]  # the system CAs do not know the broker's CA
    errors: list[int] = []
    admin = AdminClient({**cfg, "log_level": 0, "error_cb": lambda e: errors.append(e.code())})
    with pytest.raises(KafkaException) as refused:
        admin.list_topics(timeout=3)
    assert error_code(refused.value) == KafkaError._TRANSPORT
    admin.poll(0.5)  # serves error_cb
    assert reported in errors


def test_scram_sha_256_is_enabled_too(broker: KafkaBroker) -> None:
    cfg = config(broker, "kafkacoord", **{"sasl.mechanisms": "SCRAM-SHA-256"})
    assert AdminClient(cfg).list_topics(timeout=30).brokers


def test_the_controller_listener_wants_the_brokers_certificate(broker: KafkaBroker) -> None:
    """Mutual TLS: a local process without the broker's key is no controller-listener peer."""
    keystore = broker.data_dir / "server-keystore.pem"
    assert _api_versions(broker, keystore) is not None, "the broker's own certificate is served"
    assert _api_versions(broker, None) is None


def _api_versions(broker: KafkaBroker, client_cert: Path | None) -> bytes | None:
    """ApiVersions v0 to the controller listener over TLS; None if refused."""
    context = ssl.create_default_context(cafile=str(broker.data_dir / "ca.pem"))
    if client_cert is not None:
        context.load_cert_chain(client_cert)
    request = struct.pack(">hhih", 18, 0, 7, -1)  # api key, version, correlation id, no client id
    try:
        with (
            socket.create_connection((broker.host, broker.controller_port), 10) as raw,
            context.wrap_socket(raw, server_hostname=broker.host) as tls,
        ):
            tls.sendall(struct.pack(">i", len(request)) + request)
            # TLS 1.3 reports a missing client certificate after the handshake.
            answer = tls.recv(8)
    except (ssl.SSLError, ConnectionError):
        return None
    if not answer:
        return None
    assert answer[4:8] == struct.pack(">i", 7), answer
    return answer


def test_the_printed_acls_are_the_applied_ones(broker: KafkaBroker) -> None:
    result = CliRunner().invoke(app, ["acls", "--reader-principal", "User:user",
                                      "-b", broker.bootstrap])  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = parse_commands(result.output.splitlines())
    admin = AdminClient(config(broker, "admin"))
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    applied = {_acl(b) for b in admin.describe_acls(everything).result(30)}
    assert printed == applied == set(kafkacoord_acls("User:kafkacoord", ["User:user"]))


def _acl(binding: Any) -> Acl:
    resource = {ResourceType.TOPIC: Resource.TOPIC, ResourceType.GROUP: Resource.GROUP,
                ResourceType.TRANSACTIONAL_ID: Resource.TRANSACTIONAL_ID,
                ResourceType.BROKER: Resource.CLUSTER}[binding.restype]  # fmt: skip
    assert binding.permission_type == AclPermissionType.ALLOW and binding.host == "*"
    operation = "".join(w.capitalize() for w in binding.operation.name.split("_"))
    prefixed = binding.resource_pattern_type == ResourcePatternType.PREFIXED
    return Acl(binding.principal, resource, binding.name, prefixed, operation)


# Kafka's tools load --command-config like this, into the Java Admin client.
_JAVA_ADMIN = """
import java.io.FileReader;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;

public class ListTopics {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileReader in = new FileReader(args[1])) { props.load(in); }
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            System.out.println("TOPICS " + admin.listTopics().names().get());
        }
    }
}
"""


def test_the_properties_files_work_as_is_with_kafkas_java_client(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    metadata = topic_name()
    create(AdminClient(config(broker, "kafkacoord")), metadata)
    source = tmp_path / "ListTopics.java"
    source.write_text(_JAVA_ADMIN)
    props = broker.data_dir / "client-user.properties"
    done = subprocess.run(
        [java_binary(), "-cp", kafka_classpath(), str(source), broker.bootstrap, str(props)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert metadata in done.stdout.split("TOPICS ", 1)[1]


def test_dev_sh_kafka_secure_restarts_with_its_users_and_refuses_a_plain_start(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "kafka"
    first = subprocess.Popen(
        [sys.executable, "-m", "kafkacoord.storage.kafka_broker", "--data-dir", str(data_dir),
         "--secure"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        output = _read_until(first, b"client-user.properties", deadline=time.monotonic() + 120)
        assert b"SASL_SSL" in output and (data_dir / "bootstrap").is_file()
        kc_props = (data_dir / "client-kafkacoord.properties").read_text()
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    assert first.returncode == 0

    with pytest.raises(EmbeddedBrokerError, match="formatted with security"):
        KafkaBroker(data_dir).start()
    with KafkaBroker(data_dir, secure=True) as again:
        assert (data_dir / "client-kafkacoord.properties").read_text() == kc_props
        kc = config(again, "kafkacoord")
        metadata = topic_name()
        create(AdminClient(kc), metadata)
        assert produce(Producer({**kc, "enable.idempotence": True}), metadata, 1) == [None]


def _read_until(process: subprocess.Popen[bytes], marker: bytes, deadline: float) -> bytes:
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    output = b""
    while marker not in output:
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(
                f"no {marker!r} from the broker: {output.decode(errors='replace')}"
            )
        chunk = process.stdout.read()
        output += chunk or b""
        time.sleep(0.1)
    return output
