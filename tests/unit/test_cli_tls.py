"""``kafkacoord tls init``: the listener's CA and certificates, kept across runs, and the
principal settings that match what the listener sees in a real TLS handshake."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
from pathlib import Path

import pytest
import tomllib
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from typer.testing import CliRunner, Result

from kafkacoord.cli.main import app
from kafkacoord.server.listener_certs import CA_CERT, CA_DIR, CA_KEY, CERT, KEY
from kafkacoord.wire import ClientTls, server_context
from kafkacoord.wire.server import principal_of

ARGS = [
    "--daemon", "kc-1=100", "--daemon", "kc-2=101", "--node", "svc=1,2",
    "--admin", "ops", "--client", "worker", "--host", "kc.example",
]  # fmt: skip
NAMES = ("kc-1", "kc-2", "svc", "ops", "worker")


def _init(directory: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["tls", "init", "--dir", str(directory), *args])


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*.pem")}


def test_writes_a_ca_and_an_identity_directory_each_with_private_keys(tmp_path: Path) -> None:
    result = _init(tmp_path, *ARGS)
    assert result.exit_code == 0, result.output
    ca = _cert(tmp_path / CA_DIR / CA_CERT)
    assert (tmp_path / CA_DIR / CA_KEY).stat().st_mode & 0o777 == 0o600
    for name in NAMES:
        home = tmp_path / name
        assert (home / KEY).stat().st_mode & 0o777 == 0o600, name
        assert (home / CA_CERT).read_bytes() == (tmp_path / CA_DIR / CA_CERT).read_bytes()
        cert = _cert(home / CERT)
        cert.verify_directly_issued_by(ca)
        assert cert.subject.rfc4514_string() == f"CN={name}"
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        daemon = name.startswith("kc-")
        assert (ExtendedKeyUsageOID.SERVER_AUTH in usages) == daemon, name
        assert ExtendedKeyUsageOID.CLIENT_AUTH in usages
    sans = _cert(tmp_path / "kc-1" / CERT).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert set(sans.value.get_values_for_type(x509.DNSName)) == {"kc-1", "kc.example", "localhost"}
    assert sans.value.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    # The CA's key stays in its own directory: no identity's directory holds it.
    assert not any(CA_KEY in str(p) for n in NAMES for p in (tmp_path / n).iterdir())


def test_prints_the_principal_settings_as_toml_or_variables(tmp_path: Path) -> None:
    toml = _init(tmp_path, *ARGS)
    settings = tomllib.loads(toml.stdout)
    assert settings == {
        "admin_principals": ["CN=ops"],
        "node_principals": {"CN=kc-1": [100], "CN=kc-2": [101], "CN=svc": [1, 2]},
    }
    assert "issued" in toml.stderr and "CN=worker" in toml.stderr
    env = _init(tmp_path, *ARGS, "--format", "env")
    variables = dict(line.split("=", 1) for line in env.stdout.splitlines())
    assert json.loads(variables["KAFKACOORD_ADMIN_PRINCIPALS"].strip("'")) == ["CN=ops"]
    assert (
        json.loads(variables["KAFKACOORD_NODE_PRINCIPALS"].strip("'"))
        == (settings["node_principals"])
    )


def test_a_second_run_keeps_every_file_and_issues_only_new_identities(tmp_path: Path) -> None:
    assert _init(tmp_path, *ARGS).exit_code == 0
    before = _files(tmp_path)
    again = _init(tmp_path, *ARGS, "--node", "svc-2=3")
    assert again.exit_code == 0, again.output
    after = _files(tmp_path)
    assert {k: after[k] for k in before} == before  # nothing rotated, the CA least of all
    assert set(after) - set(before) == {"svc-2/ca.pem", "svc-2/cert.pem", "svc-2/key.pem"}
    _cert(tmp_path / "svc-2" / CERT).verify_directly_issued_by(_cert(tmp_path / CA_DIR / CA_CERT))
    assert tomllib.loads(again.stdout)["node_principals"]["CN=svc-2"] == [3]
    # A deleted identity is issued anew (rotation), by the same CA.
    old = (tmp_path / "svc" / CERT).read_bytes()
    for path in (tmp_path / "svc").iterdir():
        path.unlink()
    assert _init(tmp_path, *ARGS).exit_code == 0
    assert (tmp_path / "svc" / CERT).read_bytes() != old
    assert (tmp_path / CA_DIR / CA_CERT).read_bytes() == before[f"{CA_DIR}/{CA_CERT}"]


def test_without_the_ca_key_existing_identities_are_kept_but_none_is_issued(
    tmp_path: Path,
) -> None:
    assert _init(tmp_path, *ARGS).exit_code == 0
    (tmp_path / CA_DIR / CA_KEY).unlink()  # moved offline
    assert _init(tmp_path, *ARGS).exit_code == 0
    refused = _init(tmp_path, *ARGS, "--client", "new")
    assert refused.exit_code == 1
    assert "cannot issue new" in refused.output and CA_KEY in refused.output
    # A key without its certificate is not replaced by a new CA.
    (tmp_path / CA_DIR / CA_KEY).write_bytes(b"kept")
    (tmp_path / CA_DIR / CA_CERT).unlink()
    assert _init(tmp_path, *ARGS).exit_code == 1
    assert (tmp_path / CA_DIR / CA_KEY).read_bytes() == b"kept"


def test_a_certificate_of_another_ca_is_named_not_kept_silently(tmp_path: Path) -> None:
    assert _init(tmp_path / "a", "--admin", "ops").exit_code == 0
    assert _init(tmp_path / "b", "--admin", "ops").exit_code == 0
    for name in (CERT, KEY):
        (tmp_path / "a" / "ops" / name).write_bytes((tmp_path / "b" / "ops" / name).read_bytes())
    result = _init(tmp_path / "a", "--admin", "ops")
    assert result.exit_code == 1
    assert "was not issued by" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--daemon", "kc-1"], "NAME=NODE_ID"),
        (["--daemon", "kc-1=1,2"], "a daemon has one node id"),
        (["--node", "svc=x"], "NAME=NODE_ID"),
        (["--admin", "../etc"], "is not a name"),
        (["--admin", "ca"], "names the CA's directory"),
        (["--daemon", "kc-1=1", "--node", "svc=1"], "node 1 is both"),
        ([], "name at least one"),
    ],
)
def test_bad_identities_are_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = _init(tmp_path / "out", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_the_listener_sees_each_certificate_as_the_principal_printed(tmp_path: Path) -> None:
    settings = tomllib.loads(_init(tmp_path, *ARGS).stdout)
    ca = tmp_path / "ops" / CA_CERT
    server = server_context(tmp_path / "kc-1" / CERT, tmp_path / "kc-1" / KEY, ca)
    seen: list[str | None] = []
    for name in ("kc-2", "svc", "ops", "worker"):
        client = ClientTls(ca, tmp_path / name / CERT, tmp_path / name / KEY).context()
        seen.append(_handshake(server, client, "kc-1"))
    assert seen == ["CN=kc-2", "CN=svc", "CN=ops", "CN=worker"]
    assert set(seen[:2]) == set(settings["node_principals"]) - {"CN=kc-1"}
    assert seen[2:3] == settings["admin_principals"]
    # The daemon's certificate names 127.0.0.1 too, and is a client certificate itself.
    client = ClientTls(ca, tmp_path / "kc-1" / CERT, tmp_path / "kc-1" / KEY).context()
    assert _handshake(server, client, "127.0.0.1") == "CN=kc-1"


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str | None:
    """The principal the server sees for the client, over a real loopback TLS connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        peer: list[str | None] = []

        def accept() -> None:
            conn, _ = listener.accept()
            conn.settimeout(10)
            with server.wrap_socket(conn, server_side=True) as tls:
                peer.append(principal_of(tls.getpeercert()))

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        with (
            socket.create_connection(listener.getsockname(), timeout=10) as raw,
            client.wrap_socket(raw, server_hostname=host) as tls,
        ):
            tls.recv(1)  # the server closes once it has the peer's certificate
        thread.join(10)
    assert peer, "no handshake"
    return peer[0]
