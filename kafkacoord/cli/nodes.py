"""``kafkacoord nodes``: registered nodes, and fencing one."""

from __future__ import annotations

from typing import Annotated

import typer

from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    admin_session,
)
from kafkacoord.cli.render import node_table

nodes_app = typer.Typer(help="Registered nodes.", no_args_is_help=True)


@nodes_app.command("list")
def nodes_list(config: ConfigOption = None, bootstrap: BootstrapOption = None) -> None:
    """Nodes with their rack, state, epoch, roles and leadership counts."""
    with admin_session(config, bootstrap) as admin:
        image = admin.metadata()
    for line in node_table(image):
        typer.echo(line)


@nodes_app.command("fence")
def nodes_fence(
    node_id: Annotated[int, typer.Argument(help="Node id.")],
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Fence a node now, as if its session had expired; its leaderships move."""
    with admin_session(config, bootstrap) as admin:
        admin.fence_node(node_id)
    typer.echo(f"Node {node_id} fenced.")
