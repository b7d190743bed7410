"""``kafkacoord nodes``: registered nodes; fencing, adding, draining and demoting them."""

from __future__ import annotations

from typing import Annotated

import typer

from kafkacoord.cli.as_of import AsOfOption, WarehouseOption, metadata_image
from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    KafkaConfigOption,
    admin_session,
    fail,
)
from kafkacoord.cli.documents import node_list
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.cli.rebalance import MovesOption, PerNodeOption, WaitOption, execute, plan_for
from kafkacoord.cli.render import node_table
from kafkacoord.client.admin.rebalance import Limits, demotion
from kafkacoord.coordinator.controller.planner_goals import PlanError

nodes_app = typer.Typer(help="Registered nodes.", no_args_is_help=True)


@nodes_app.command("list")
def nodes_list(
    as_of: AsOfOption = None,
    warehouse: WarehouseOption = None,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Nodes with their rack, state, epoch, roles and leadership counts; with --as-of, as
    they stood then."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = metadata_image(admin, as_of, warehouse)
    if output is OutputFormat.json:
        print_json(node_list(image))
        return
    for line in node_table(image):
        typer.echo(line)


@nodes_app.command("fence")
def nodes_fence(
    node_id: Annotated[int, typer.Argument(help="Node id.")],
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Fence a node now, as if its session had expired; its leaderships move."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        admin.fence_node(node_id)
    typer.echo(f"Node {node_id} fenced.")


@nodes_app.command("add")
def nodes_add(
    node_ids: Annotated[list[int], typer.Argument(help="New nodes, registered and live.")],
    max_concurrent_moves_per_node: PerNodeOption = 5,
    max_concurrent_moves: MovesOption = 100,
    wait: WaitOption = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Fill new nodes: a rebalance of the whole cluster onto them."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = admin.metadata()
        down = [n for n in node_ids if n not in image.live_nodes()]
        if down:
            fail(f"nodes {down} are not registered and live: start them first")
        planned = plan_for(admin, image)
        gained = sum(planned.summary.replicas_after[n] for n in node_ids)
        if not gained:
            fail(f"the plan puts nothing on nodes {node_ids}: the cluster is balanced without "
                 "them (or rack spread keeps replicas elsewhere)")  # fmt: skip
        execute(admin, planned, Limits(max_concurrent_moves_per_node, max_concurrent_moves),
                wait=wait, json_output=False)  # fmt: skip


@nodes_app.command("remove")
def nodes_remove(
    node_ids: Annotated[list[int], typer.Argument(help="Nodes to drain.")],
    max_concurrent_moves_per_node: PerNodeOption = 5,
    max_concurrent_moves: MovesOption = 100,
    wait: WaitOption = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Drain nodes before decommissioning them: every replica moves elsewhere."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = admin.metadata()
        try:
            planned = plan_for(admin, image, node_ids)
        except (PlanError, ValueError) as exc:
            fail(f"cannot drain {node_ids}: {exc}")
        execute(admin, planned, Limits(max_concurrent_moves_per_node, max_concurrent_moves),
                wait=wait, json_output=False)  # fmt: skip


@nodes_app.command("demote")
def nodes_demote(
    node_ids: Annotated[list[int], typer.Argument(help="Nodes to move leadership away from.")],
    wait: WaitOption = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Move preferred leadership away from nodes (before maintenance); no data moves."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        planned = demotion(admin.metadata(), node_ids)
        execute(admin, planned, Limits(), wait=wait, json_output=False)
