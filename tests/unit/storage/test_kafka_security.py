"""The secured embedded Kafka's settings and files, without starting a JVM."""

from __future__ import annotations

import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from kafkacoord.storage.kafka_broker import KafkaBroker
from kafkacoord.storage.kafka_security import BROKER_CN, KafkaSecurity


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_a_plain_broker_has_no_security_settings(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path)
    settings = _properties(broker._write_config())
    assert (
        settings["listeners"]
        == f"PLAINTEXT://{broker.bootstrap},CONTROLLER://127.0.0.1:{broker.controller_port}"
    )
    assert settings["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert not [key for key in settings if "sasl" in key or "ssl" in key or "authorizer" in key]


def test_a_secure_broker_listens_sasl_ssl_and_denies_by_default(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, secure=True)
    broker.security = KafkaSecurity.create(tmp_path)
    path = broker._write_config()
    settings = _properties(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "it holds the admin password"
    assert settings["advertised.listeners"] == f"SASL_SSL://{broker.bootstrap}"
    assert settings["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SSL"
    assert settings["listener.name.controller.ssl.client.auth"] == "required"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["super.users"] == f"User:admin;User:CN={BROKER_CN}"
    assert KafkaSecurity.load(tmp_path) == broker.security


def test_every_user_is_formatted_under_both_mechanisms(tmp_path: Path) -> None:
    security = KafkaSecurity.create(tmp_path)
    args = security.format_args()
    assert args[::2] == ["--add-scram"] * 6
    password = security.passwords["kafkacoord"]
    assert f"SCRAM-SHA-256=[name=kafkacoord,password={password}]" in args
    assert len(set(security.passwords.values())) == 3


def test_the_server_certificate_is_signed_by_the_ca_for_loopback(tmp_path: Path) -> None:
    KafkaSecurity.create(tmp_path)
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    pem = (tmp_path / "server-keystore.pem").read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----"), "PKCS#8, as Kafka's PEM store wants"
    key = load_pem_private_key(pem, None)
    cert, chain_ca = x509.load_pem_x509_certificates(pem)
    cert.verify_directly_issued_by(ca)
    assert chain_ca == ca
    assert cert.public_key() == key.public_key()
    assert cert.subject.rfc4514_string() == f"CN={BROKER_CN}"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
