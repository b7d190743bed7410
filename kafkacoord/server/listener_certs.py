"""Certificates for the coordinator listener's mutual TLS, and the settings that match.

One directory holds a CA (``ca/ca.pem``, ``ca/ca-key.pem``) and, per identity, a
directory of its own: ``NAME/cert.pem``, ``NAME/key.pem`` (mode 0600) and a copy of the
CA certificate ``NAME/ca.pem``, so a container can mount just its own. A daemon's
certificate is its listener's and its own agent's client certificate; every other
identity's is a client certificate. The principal of ``NAME`` is ``CN=NAME``, as the
listener names a peer (:func:`kafkacoord.wire.server.principal_of`).

Writing is idempotent: a CA or identity whose files exist is kept, so running it again
(a restarted init container) rotates nothing; only missing identities are issued.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from kafkacoord.storage.kafka_certs import (
    CLIENT,
    SERVER_AND_CLIENT,
    Authority,
    cert_pem,
    key_pem,
    write_private,
)

CA_DIR = "ca"
CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
CERT = "cert.pem"
KEY = "key.pem"
CA_NAME = "kafkacoord listener CA"
LEAF_DAYS = 825
# Every daemon's certificate names these too: a client beside it (the CLI in its
# container, a health check) reaches it on loopback.
LOCAL_HOSTS = ("localhost", "127.0.0.1")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class CertificateError(ValueError):
    """An identity or the directory cannot be used as asked."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A certificate holder: a daemon (``server``), a node agent, an admin, or a client."""

    name: str
    server: bool = False
    node_ids: tuple[int, ...] = ()
    admin: bool = False

    @property
    def principal(self) -> str:
        return f"CN={self.name}"

    def roles(self) -> str:
        words = ["daemon"] if self.server else []
        if self.node_ids:
            words.append(f"node {','.join(map(str, self.node_ids))}")
        if self.admin:
            words.append("admin")
        return " ".join(words) or "client"


def identities(
    daemons: Mapping[str, int], nodes: Mapping[str, Sequence[int]],
    admins: Iterable[str] = (), clients: Iterable[str] = (),
) -> list[Identity]:  # fmt: skip
    """One identity per name, its roles merged (an admin may also run a node)."""
    merged: dict[str, Identity] = {}

    def add(
        name: str, *, server: bool = False, node_ids: Sequence[int] = (), admin: bool = False
    ) -> None:
        if not _NAME.fullmatch(name):
            raise CertificateError(
                f"{name!r} is not a name: letters, digits, '.', '_' and '-', at most 64"
            )
        if name == CA_DIR:
            raise CertificateError(f"{CA_DIR!r} names the CA's directory; pick another name")
        old = merged.get(name, Identity(name))
        ids = tuple(sorted(set(old.node_ids) | set(node_ids)))
        merged[name] = Identity(name, old.server or server, ids, old.admin or admin)

    for name, node_id in daemons.items():
        add(name, server=True, node_ids=(node_id,))
    for name, ids in nodes.items():
        add(name, node_ids=tuple(ids))
    for name in admins:
        add(name, admin=True)
    for name in clients:
        add(name)
    owners: dict[int, str] = {}
    for identity in merged.values():
        for node_id in identity.node_ids:
            if node_id < 0:
                raise CertificateError(f"{identity.name}: node id {node_id} is negative")
            other = owners.setdefault(node_id, identity.name)
            if other != identity.name:
                raise CertificateError(f"node {node_id} is both {other}'s and {identity.name}'s")
    return list(merged.values())


@dataclass(frozen=True, slots=True)
class Written:
    identity: Identity
    issued: bool  # False: its files were there and are kept


def write_certificates(
    directory: Path, wanted: Sequence[Identity], hosts: Sequence[str] = (),
    days: int = LEAF_DAYS,
) -> list[Written]:  # fmt: skip
    """Make the CA if missing, and every identity's files that are missing. A daemon's
    certificate names its own name, ``hosts`` and :data:`LOCAL_HOSTS` (SANs)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_dir = directory / CA_DIR
    ca_dir.mkdir(mode=0o700, exist_ok=True)
    ca_cert_path, ca_key_path = ca_dir / CA_CERT, ca_dir / CA_KEY
    ca: Authority | None = None
    if ca_cert_path.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
        if ca_key_path.exists():
            ca = Authority.load(ca_cert_path.read_bytes(), ca_key_path.read_bytes())
    elif ca_key_path.exists():
        raise CertificateError(f"{ca_key_path} is there without {ca_cert_path}: restore it")
    else:
        ca = Authority.generate(CA_NAME)
        _replace(ca_key_path, key_pem(ca.key), private=True)
        _replace(ca_cert_path, cert_pem(ca.cert))
        ca_cert = ca.cert
    written = []
    for identity in wanted:
        home = directory / identity.name
        cert_path, key_path = home / CERT, home / KEY
        issued = not (cert_path.exists() and key_path.exists())
        if issued:
            if ca is None:
                raise CertificateError(
                    f"cannot issue {identity.name}: the CA key {ca_key_path} is not there"
                )
            sans = [identity.name, *hosts, *LOCAL_HOSTS] if identity.server else []
            usages = SERVER_AND_CLIENT if identity.server else CLIENT
            key, cert = ca.issue(identity.name, list(dict.fromkeys(sans)), usages, days)
            home.mkdir(exist_ok=True)
            _replace(key_path, key_pem(key), private=True)
            _replace(cert_path, cert_pem(cert))
        else:
            _check_issued(cert_path, ca_cert, ca_cert_path)
        _replace(home / CA_CERT, cert_pem(ca_cert))
        written.append(Written(identity, issued))
    return written


def principal_settings(wanted: Iterable[Identity]) -> tuple[list[str], dict[str, list[int]]]:
    """``admin_principals`` and ``node_principals`` for these identities."""
    wanted = list(wanted)
    admins = [i.principal for i in wanted if i.admin]
    nodes = {i.principal: list(i.node_ids) for i in wanted if i.node_ids}
    return admins, nodes


def settings_toml(wanted: Iterable[Identity]) -> str:
    admins, nodes = principal_settings(wanted)
    lines = [f"admin_principals = {json.dumps(admins)}", "", "[node_principals]"]
    lines += [f"{json.dumps(p)} = {json.dumps(ids)}" for p, ids in nodes.items()]
    return "\n".join(lines) + "\n"


def settings_env(wanted: Iterable[Identity]) -> dict[str, str]:
    admins, nodes = principal_settings(wanted)
    return {
        "KAFKACOORD_ADMIN_PRINCIPALS": json.dumps(admins),
        "KAFKACOORD_NODE_PRINCIPALS": json.dumps(nodes),
    }


def _check_issued(cert_path: Path, ca_cert: x509.Certificate, ca_path: Path) -> None:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise CertificateError(
            f"{cert_path} was not issued by {ca_path}: delete its directory to issue it anew"
        ) from exc


def _replace(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` whole or not at all: a reader never sees half a key."""
    if path.exists() and path.read_bytes() == data:
        return
    temporary = path.with_name(f".{path.name}.tmp")
    if private:
        write_private(temporary, data)
    else:
        temporary.unlink(missing_ok=True)
        temporary.write_bytes(data)
    os.replace(temporary, path)
