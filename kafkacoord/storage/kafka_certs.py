"""A CA and a server certificate for the secured embedded Kafka broker, as PEM files.

Kafka reads PEM key and trust stores (``ssl.keystore.type=PEM``) when the key is PKCS#8.
The CA's key signs the server certificate and is then dropped: nothing else is ever
issued, and a key that is not kept cannot leak.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650
# A server certificate that is also the broker's client certificate (controller listener).
_USAGES = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def write_server_pki(
    ca_path: Path, keystore_path: Path, common_name: str,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
) -> None:  # fmt: skip
    """Write the CA certificate to ``ca_path`` and the server's PKCS#8 key and certificate
    chain to ``keystore_path`` (mode 0600). The certificate names ``hosts`` (SAN), and is
    also the server's client certificate (its subject: ``CN=common_name``)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafkacoord embedded Kafka CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(subject, ca_name, key.public_key(), now)
        .add_extension(
            x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(_USAGES), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(keystore_path, key_pem + cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    ca_path.write_bytes(ca_cert.public_bytes(pem))


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner can read, created so from the start."""
    path.unlink(missing_ok=True)
    with open(path, "xb", opener=lambda name, flags: os.open(name, flags, 0o600)) as out:
        out.write(data)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
) -> x509.CertificateBuilder:  # fmt: skip
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # tolerate a little clock skew
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
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
