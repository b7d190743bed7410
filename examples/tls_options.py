"""The examples' mutual-TLS options: the daemon's KAFKACOORD_TLS_* client settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kafkacoord.wire import ClientTls


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """Mutual TLS to the daemons' listeners: the daemon's KAFKACOORD_TLS_* client settings."""
    for flag, variable, what in (
        ("--tls-ca", "KAFKACOORD_TLS_CA", "CA of the daemons' listener certificates"),
        ("--tls-cert", "KAFKACOORD_TLS_CERT", "this process's client certificate (PEM)"),
        ("--tls-key", "KAFKACOORD_TLS_KEY", "its private key (PEM)"),
    ):
        parser.add_argument(flag, default=os.environ.get(variable), help=f"{what}; ${variable}")


def client_tls(args: argparse.Namespace) -> ClientTls | None:
    if args.tls_ca is None:
        return None  # the daemons' listeners speak plaintext
    cert, key = (Path(p) if p else None for p in (args.tls_cert, args.tls_key))
    return ClientTls(Path(args.tls_ca), cert, key)
