"""Certificates as PEM files: a CA (:class:`Authority`) and what it issues.

The secured embedded Kafka broker gets a CA and a server certificate
(:func:`write_server_pki`); Kafka reads PEM key and trust stores
(``ssl.keystore.type=PEM``) when the key is PKCS#8. That CA's key signs the server
certificate and is then dropped: nothing else is ever issued, and a key that is not
kept cannot leak. The coordinator listener's certificates (``kafkacoord tls init``)
come from an :class:`Authority` that is kept.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650
# A server certificate that is also its owner's client certificate.
SERVER_AND_CLIENT = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
CLIENT = (ExtendedKeyUsageOID.CLIENT_AUTH,)


def write_server_pki(
    ca_path: Path, keystore_path: Path, common_name: str,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
) -> None:  # fmt: skip
    """Write the CA certificate to ``ca_path`` and the server's PKCS#8 key and certificate
    chain to ``keystore_path`` (mode 0600). The certificate names ``hosts`` (SAN), and is
    also the server's client certificate (its subject: ``CN=common_name``)."""
    ca = Authority.generate("kafkacoord embedded Kafka CA")
    key, cert = ca.issue(common_name, hosts, SERVER_AND_CLIENT)
    write_private(keystore_path, key_pem(key) + cert_pem(cert) + cert_pem(ca.cert))
    ca_path.write_bytes(cert_pem(ca.cert))


@dataclass(frozen=True, slots=True)
class Authority:
    """A CA (EC P-256) that signs certificates with a ``CN=…`` subject."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls, common_name: str, days: int = VALID_DAYS) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(common_name)
        cert = (
            _builder(name, name, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert: bytes, key: bytes) -> Authority:
        """A CA from its PEM certificate and PKCS#8 key (:func:`key_pem`, :func:`cert_pem`)."""
        private = serialization.load_pem_private_key(key, password=None)
        if not isinstance(private, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is not an EC key")
        return cls(x509.load_pem_x509_certificate(cert), private)

    def issue(
        self, common_name: str, hosts: Sequence[str], usages: Sequence[x509.ObjectIdentifier],
        days: int = VALID_DAYS,
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:  # fmt: skip
        """A new key and its certificate: subject ``CN=common_name``, ``hosts`` as SANs."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(_name(common_name), self.cert.subject, key.public_key(), days)
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False
            )
        cert = (
            builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return key, cert


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8, unencrypted: what Kafka's PEM key stores and Python's ssl both read."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner can read, created so from the start."""
    path.unlink(missing_ok=True)
    with open(path, "xb", opener=lambda name, flags: os.open(name, flags, 0o600)) as out:
        out.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # tolerate a little clock skew
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
        crl_sign=cert_sign, encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
