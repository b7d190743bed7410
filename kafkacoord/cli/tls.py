"""``kafkacoord tls``: certificates for the coordinator listener's mutual TLS."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from kafkacoord.cli.common import fail
from kafkacoord.server.listener_certs import (
    LEAF_DAYS,
    CertificateError,
    identities,
    settings_env,
    settings_toml,
    write_certificates,
)

tls_app = typer.Typer(
    help="Certificates for the coordinator listener's mutual TLS.", no_args_is_help=True
)


class SettingsFormat(str, Enum):
    toml = "toml"
    env = "env"


def _pairs(values: list[str] | None, option: str) -> dict[str, list[int]]:
    pairs: dict[str, list[int]] = {}
    for value in values or []:
        name, sep, ids = value.partition("=")
        try:
            pairs.setdefault(name, []).extend(int(i) for i in ids.split(","))
        except ValueError:
            sep = ""
        if not sep or not name:
            fail(f"{option} expects NAME=NODE_ID (NAME=ID,ID for a node), got {value!r}", 2)
    return pairs


@tls_app.command("init")
def init(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the CA and one directory per identity go.")
    ],
    daemon: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=NODE_ID: a daemon, its listener's certificate (SANs: NAME, every "
            "--host, localhost, 127.0.0.1) mapped to its node id; repeatable.",
        ),
    ] = None,
    node: Annotated[
        list[str] | None,
        typer.Option(help="NAME=ID[,ID...]: a node agent's certificate and its node ids."),
    ] = None,
    admin: Annotated[
        list[str] | None, typer.Option(help="NAME: a certificate in admin_principals.")
    ] = None,
    client: Annotated[
        list[str] | None,
        typer.Option(help="NAME: a certificate with neither role (group members, readers)."),
    ] = None,
    host: Annotated[
        list[str] | None,
        typer.Option(help="Another host name or IP every daemon's certificate names."),
    ] = None,
    days: Annotated[int, typer.Option(min=1, help="Validity of new certificates.")] = LEAF_DAYS,
    output: Annotated[
        SettingsFormat,
        typer.Option("--format", help="The settings printed: TOML, or KAFKACOORD_* variables."),
    ] = SettingsFormat.toml,
) -> None:
    """Make a CA and a certificate per identity, keeping those already there, and print
    the admin_principals and node_principals every daemon needs."""
    daemons = _pairs(daemon, "--daemon")
    for name, ids in daemons.items():
        if len(ids) != 1:
            fail(f"--daemon {name}: a daemon has one node id, got {ids}", 2)
    try:
        wanted = identities(
            {name: ids[0] for name, ids in daemons.items()}, _pairs(node, "--node"),
            admin or [], client or [],
        )  # fmt: skip
    except CertificateError as exc:
        fail(str(exc), 2)
    if not wanted:
        fail("name at least one --daemon, --node, --admin or --client", 2)
    try:
        written = write_certificates(directory, wanted, host or [], days)
    except (CertificateError, OSError) as exc:
        fail(str(exc))
    for entry in written:
        state = "issued" if entry.issued else "kept  "
        identity = entry.identity
        typer.echo(f"{state} {directory / identity.name}  {identity.principal}  "
                   f"{identity.roles()}", err=True)  # fmt: skip
    if output is SettingsFormat.env:
        for variable, value in settings_env(wanted).items():
            typer.echo(f"{variable}='{value}'")
    else:
        typer.echo(settings_toml(wanted), nl=False)
