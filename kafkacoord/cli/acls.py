"""``kafkacoord acls``: the ``kafka-acls.sh`` commands a cluster admin runs for kafkacoord."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kafkacoord.cli.common import fail
from kafkacoord.storage.acls import DEFAULT_PRINCIPAL, kafka_acls_commands, kafkacoord_acls


def acls(
    principal: Annotated[
        str, typer.Option(help="kafkacoord's principal: it alone writes the internal topics.")
    ] = DEFAULT_PRINCIPAL,
    reader_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--reader-principal",
            help="A principal that only reads the internal topics (clients, the views); "
            "repeatable.",
        ),
    ] = None,
    topic_prefix: Annotated[
        str, typer.Option(help="Prefix of the internal topics (the topic_prefix setting).")
    ] = "__kc_",
    bootstrap: Annotated[
        str | None,
        typer.Option(
            "--bootstrap-server",
            "-b",
            help="Put in the commands (default: $KAFKACOORD_BOOTSTRAP, else BROKER:9092).",
        ),
    ] = None,
    command_config: Annotated[
        str, typer.Option(help="The cluster admin's client properties file, put in the commands.")
    ] = "admin.properties",
) -> None:
    """Print the kafka-acls.sh commands that let kafkacoord and readers use a secured cluster."""
    readers = reader_principal or []
    for name in (principal, *readers):
        kind, sep, rest = name.partition(":")
        if not sep or not kind or not rest:
            fail(f"a principal is TYPE:NAME (User:kafkacoord), got {name!r}", 2)
    if not topic_prefix:
        fail("--topic-prefix must not be empty: the ACLs would cover every topic", 2)
    servers = bootstrap or os.environ.get("KAFKACOORD_BOOTSTRAP") or "BROKER:9092"
    for line in kafka_acls_commands(
        kafkacoord_acls(principal, readers, topic_prefix), servers, command_config
    ):
        typer.echo(line)
