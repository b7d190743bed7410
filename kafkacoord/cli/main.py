"""The ``kafkacoord`` command line."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from kafkacoord import BUILD, __version__, logs
from kafkacoord.cli import (
    acls,
    console,
    explain,
    explain_group,  # noqa: F401  (registers explain group)
    group_reset,  # noqa: F401  (registers groups reset-offsets)
    groups,
    leaders,
    nodes,
    reassign,
    rebalance,
    status,
    tls,
    topics,
)
from kafkacoord.server.settings import load_settings
from kafkacoord.storage.errors import StorageError

app = typer.Typer(
    name="kafkacoord",
    help="Kafka's controller and group coordinator, with all state stored on Kafka.",
    no_args_is_help=True,
)


class EmbeddedBrokerKind(str, Enum):
    tansu = "tansu"
    kafka = "kafka"


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="TOML config file (also $KAFKACOORD_CONFIG).", show_default=False
    ),
]


@app.command()
def daemon(
    config: ConfigOption = None,
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers; omit for the embedded broker.")
    ] = None,
    node_id: Annotated[int | None, typer.Option(help="This daemon's node id.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Cache and log directory.")] = None,
    listen: Annotated[
        str | None, typer.Option(help="host:port of the request listener.", show_default=False)
    ] = None,
    strict: Annotated[
        bool | None, typer.Option("--strict/--lenient", help="Stop on poison records.")
    ] = None,
    embedded_broker: Annotated[
        EmbeddedBrokerKind | None,
        typer.Option(help="Embedded broker when no bootstrap is given: tansu or kafka."),
    ] = None,
) -> None:
    """Run the daemon until SIGINT or SIGTERM."""
    from kafkacoord.server.daemon import Daemon
    from kafkacoord.server.listener_policy import ListenerSecurityError

    try:
        settings = load_settings(
            config,
            bootstrap=bootstrap,
            node_id=node_id,
            data_dir=data_dir,
            listen=listen,
            strict_records=strict,
            embedded_broker=embedded_broker.value if embedded_broker else None,
        )
    except (ValidationError, FileNotFoundError) as exc:
        typer.echo(f"error: invalid configuration: {exc}", err=True)
        raise typer.Exit(2) from exc
    logs.configure(settings.log_level, settings.log_format)
    try:
        daemon = Daemon(settings)
    except ListenerSecurityError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        code = daemon.run()
    except StorageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    raise typer.Exit(code)


@app.command()
def version() -> None:
    """Print the version, and which build of the hot path runs (compiled, or the sources)."""
    typer.echo(f"kafkacoord {__version__} (hot path: {BUILD.value})")


app.add_typer(topics.topics_app, name="topics")
app.add_typer(nodes.nodes_app, name="nodes")
app.add_typer(explain.explain_app, name="explain")
app.add_typer(reassign.reassign_app, name="reassign")
app.add_typer(rebalance.rebalance_app, name="rebalance")
app.command("elect-leaders")(leaders.elect_leaders)
app.command("shutdown-node")(leaders.shutdown_node)
app.add_typer(groups.groups_app, name="groups")
app.add_typer(console.console_app, name="console")
app.command("acls")(acls.acls)
app.add_typer(tls.tls_app, name="tls")
status.register(app)


def _views() -> None:
    # The views commands import Spark only when they run, so this costs nothing.
    from kafkacoord.spark.cli import views_app

    app.add_typer(views_app, name="views")


_views()


def main() -> None:
    sys.exit(app())
