"""Certificates made per test run (trustme), written as the listener and clients read them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import trustme


def write_pki(
    root: Path, ca: trustme.CA, leaves: Mapping[str, trustme.LeafCert]
) -> dict[str, Path]:
    """``ca.pem``, then ``<name>.pem`` (the certificate) and ``<name>-key.pem`` per leaf."""
    files = {"ca": root / "ca.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    for name, cert in leaves.items():
        files[name] = root / f"{name}.pem"
        files[f"{name}-key"] = root / f"{name}-key.pem"
        cert.cert_chain_pems[0].write_to_path(str(files[name]))
        cert.private_key_pem.write_to_path(str(files[f"{name}-key"]))
    return files
