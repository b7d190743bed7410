"""Kafka client properties files, translated for librdkafka, the batch producer and Spark."""

from __future__ import annotations

import ast
import pickle
import re
import ssl
from pathlib import Path

import pytest
import trustme

from kafkacoord.storage.clients import base_config
from kafkacoord.storage.kafka_config import (
    Bootstrap,
    KafkaClientConfig,
    KafkaConfigError,
    client_config_of,
)

SCRAM_FILE = """\
# written by an admin for kafka-topics.sh --command-config
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="kafkacoord" password="s3cr=t;x";
ssl.truststore.type=PEM
ssl.truststore.location={ca}
"""


def _write(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def test_a_scram_file_becomes_librdkafka_settings(tmp_path: Path) -> None:
    config = KafkaClientConfig.load(_write(tmp_path, SCRAM_FILE.format(ca="/etc/ca.pem")))
    assert config.librdkafka() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "kafkacoord",
        "sasl.password": "s3cr=t;x",
        "ssl.ca.location": "/etc/ca.pem",
    }
    assert config.sasl is not None and config.sasl.username == "kafkacoord"
    assert "s3cr" not in repr(config.sasl) and "s3cr" not in repr(config)


def test_java_settings_stay_as_written_for_spark(tmp_path: Path) -> None:
    config = KafkaClientConfig.load(_write(tmp_path, SCRAM_FILE.format(ca="/etc/ca.pem")))
    java = config.java()
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["ssl.truststore.type"] == "PEM"
    assert java["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram")


def test_plain_over_plaintext_and_librdkafka_spellings(tmp_path: Path) -> None:
    config = KafkaClientConfig.of({
        "security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice", "sasl.password": "pw",
    })  # fmt: skip
    assert config.librdkafka()["security.protocol"] == "SASL_PLAINTEXT"
    assert config.sasl is not None and config.sasl.mechanism == "PLAIN"
    assert config.ssl_context() is None


def test_mutual_tls_with_a_pem_keystore(tmp_path: Path, ca: trustme.CA) -> None:
    leaf = ca.issue_cert("kafkacoord")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "me.pem"))
    config = KafkaClientConfig.of({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "me.pem"),
    })  # fmt: skip
    settings = config.librdkafka()
    assert settings["ssl.key.location"] == settings["ssl.certificate.location"]
    assert "ssl.keystore.location" not in settings
    context = config.ssl_context()
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_hostname_check_off_only_when_asked(tmp_path: Path, ca: trustme.CA) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    config = KafkaClientConfig.of({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "",
    })  # fmt: skip
    assert config.librdkafka()["ssl.endpoint.identification.algorithm"] == "none"
    context = config.ssl_context()
    assert context is not None and not context.check_hostname


def test_oauthbearer_for_librdkafka_but_not_the_batch_producer() -> None:
    config = KafkaClientConfig.of({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required clientId="kc" clientSecret="shh" scope="kafka";',
    })  # fmt: skip
    settings = config.librdkafka()
    assert settings["sasl.oauthbearer.method"] == "oidc"
    assert settings["sasl.oauthbearer.client.id"] == "kc"
    assert settings["sasl.oauthbearer.client.secret"] == "shh"
    assert settings["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"
    assert config.sasl is None  # the batch producer speaks PLAIN and SCRAM only


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "PEM trust stores"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        ({"security.protocol": "TLS"}, "security.protocol=TLS"),
        ({"security.protocol": "SSL", "request.timeout.ms": "5"}, "request.timeout.ms"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'x.ScramLoginModule required username="u";'},
            "username and password",
        ),
    ],
)  # fmt: skip
def test_a_file_kafkacoord_cannot_use_is_refused_with_what_to_change(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(KafkaConfigError, match=re.escape(message)):
        KafkaClientConfig.of(settings, source="bad.properties")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KafkaConfigError, match=re.escape("nope.properties")):
        KafkaClientConfig.load(tmp_path / "nope.properties")


def test_every_librdkafka_client_takes_the_config_its_bootstrap_carries(tmp_path: Path) -> None:
    config = KafkaClientConfig.load(_write(tmp_path, SCRAM_FILE.format(ca="/etc/ca.pem")))
    secured = Bootstrap("broker:9093", config)
    assert secured == "broker:9093" and client_config_of(secured) is config
    built = base_config(secured, "kafkacoord-x", **{"acks": "all"})
    assert built["sasl.username"] == "kafkacoord" and built["bootstrap.servers"] == "broker:9093"
    assert type(built["bootstrap.servers"]) is str
    # A plain string carries nothing: the client is plaintext, as before.
    assert "security.protocol" not in base_config("broker:9093", "kafkacoord-x")


def test_a_bootstrap_keeps_its_config_through_pickling(tmp_path: Path) -> None:
    config = KafkaClientConfig.load(_write(tmp_path, SCRAM_FILE.format(ca="/etc/ca.pem")))
    copy = pickle.loads(pickle.dumps(Bootstrap("broker:9093", config)))
    assert copy == "broker:9093" and client_config_of(copy) == config


PACKAGE = Path(__file__).resolve().parents[3] / "kafkacoord"
_CLIENTS = {"Consumer", "Producer", "AdminClient"}


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def test_every_librdkafka_client_in_the_package_is_built_from_base_config() -> None:
    """base_config is where a client learns its cluster's credentials; a client built
    around it would reach a secured cluster without them."""
    bypasses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            calls = [n for n in ast.walk(function) if isinstance(n, ast.Call)]
            names = {_called_name(c) for c in calls}
            for call in calls:
                if _called_name(call) in _CLIENTS and "base_config" not in names:
                    bypasses.append(f"{path.relative_to(PACKAGE)}:{call.lineno}")
    assert bypasses == []
    # The check sees real clients: the package builds a dozen of them.
    assert (
        sum(
            1
            for path in PACKAGE.rglob("*.py")
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and _called_name(n) in _CLIENTS
        )
        >= 8
    )
