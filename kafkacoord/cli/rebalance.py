"""``kafkacoord rebalance``: goal-based rebalancing (plan, execute, status, stop).

After Cruise Control's ``rebalance`` (dry run by default), ``state`` and
``stop_proposal_execution``; ``nodes add``/``remove``/``demote`` build on it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from typing import Annotated, Any

import typer

from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    KafkaConfigOption,
    admin_session,
    fail,
)
from kafkacoord.cli.output import OutputFormat, OutputOption
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.admin.rebalance import Limits, Proposal, proposal, rebalance_status
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.controller.planner_goals import PlanError
from kafkacoord.progress import on_terminal, progress_bar

rebalance_app = typer.Typer(
    help="Goal-based rebalancing: rack spread, even replicas and leaders, few moves.",
    invoke_without_command=True,
)

RemoveOption = Annotated[
    list[int] | None,
    typer.Option("--remove-node", help="Drain this node (repeat for several)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="The same as --output json.")]
PerNodeOption = Annotated[
    int, typer.Option(min=1, help="Moving partitions that add or drop a replica on one node.")
]
MovesOption = Annotated[int, typer.Option(min=1, help="Partitions moving data at once.")]
LeaderMovesOption = Annotated[
    int, typer.Option(min=1, help="Preferred-leader changes per step (no data moves).")
]
WaitOption = Annotated[bool, typer.Option("--wait", help="Wait until it has finished.")]
BAR = 30


@rebalance_app.callback()
def rebalance_default(ctx: typer.Context) -> None:
    """Without a command: the plan (a dry run)."""
    if ctx.invoked_subcommand is None:
        rebalance_plan(remove_node=None, json_output=False, output=OutputFormat.table,
                       config=None, bootstrap=None)  # fmt: skip


@rebalance_app.command("plan")
def rebalance_plan(
    remove_node: RemoveOption = None,
    json_output: JsonOption = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Show what a rebalance would do; changes nothing."""
    json_output = json_output or output is OutputFormat.json
    with admin_session(config, bootstrap, kafka_config) as admin:
        planned = _plan(admin, remove_node or [])
    if json_output:
        typer.echo(json.dumps(planned.to_json(), indent=2))
        return
    for line in plan_lines(planned):
        typer.echo(line)


@rebalance_app.command("execute")
def rebalance_execute(
    remove_node: RemoveOption = None,
    max_concurrent_moves_per_node: PerNodeOption = 5,
    max_concurrent_moves: MovesOption = 100,
    max_concurrent_leader_moves: LeaderMovesOption = 1000,
    wait: WaitOption = False,
    json_output: JsonOption = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Plan, then have the controller execute it within the limits."""
    limits = Limits(max_concurrent_moves_per_node, max_concurrent_moves,
                    max_concurrent_leader_moves)  # fmt: skip
    json_output = json_output or output is OutputFormat.json
    with admin_session(config, bootstrap, kafka_config) as admin:
        planned = _plan(admin, remove_node or [])
        execute(admin, planned, limits, wait=wait, json_output=json_output)


def execute(
    admin: ControllerAdmin, planned: Proposal, limits: Limits, *, wait: bool, json_output: bool
) -> None:
    """Start ``planned`` (and with ``wait`` follow it to the end); shared by ``nodes``."""
    started = admin.start_rebalance(planned.request(limits))
    if json_output and not wait:
        typer.echo(json.dumps({**planned.to_json(), "proposal_id": started.proposal_id,
                               "state": started.state}, indent=2))  # fmt: skip
        return
    if not json_output:
        for line in plan_lines(planned):
            typer.echo(line)
        typer.echo(f"Rebalance {started.proposal_id} {started.state}: {started.moves} "
                   "partitions to move. Follow it with: kafkacoord rebalance status")  # fmt: skip
    if wait:
        status = _wait(admin, started.proposal_id, started.moves, quiet=json_output)
        if json_output:
            typer.echo(json.dumps(status, indent=2))
        if status["state"] != "COMPLETED":
            raise typer.Exit(1)


@rebalance_app.command("status")
def rebalance_status_command(
    json_output: JsonOption = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """The running or last rebalance: state, progress, moves in flight per node."""
    json_output = json_output or output is OutputFormat.json
    with admin_session(config, bootstrap, kafka_config) as admin:
        status = rebalance_status(admin.metadata())
    if status is None:
        if json_output:
            typer.echo("null")
            return
        raise fail("no rebalance has run")
    if json_output:
        typer.echo(json.dumps(status, indent=2))
        return
    for line in status_lines(status):
        typer.echo(line)


@rebalance_app.command("stop")
def rebalance_stop(
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Start no more moves; the ones in flight finish."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        stopped = admin.stop_rebalance()
    typer.echo(f"Rebalance {stopped.proposal_id} {stopped.state}: queued moves cancelled; "
               "moves in flight finish.")  # fmt: skip


def _plan(admin: ControllerAdmin, remove: list[int]) -> Proposal:
    try:
        return plan_for(admin, admin.metadata(), remove)
    except (PlanError, ValueError) as exc:
        raise fail(f"no plan meets the goals: {exc}") from exc


def plan_for(
    admin: ControllerAdmin, image: MetadataImage, remove: Collection[int] = ()
) -> Proposal:
    """The cluster's plan; the group shards' topic is planned over the daemons alone."""
    return proposal(image, remove, internal=(admin.topics.offsets,))


def _wait(admin: ControllerAdmin, proposal_id: str, moves: int, *, quiet: bool) -> dict[str, Any]:
    """Follow the rebalance to its end: a bar on a terminal, else a line per change."""
    drawing = on_terminal(json_output=quiet)
    last = ""
    with progress_bar(moves, f"Rebalance {proposal_id}", enabled=drawing,
                      unit="partitions") as bar:  # fmt: skip
        while True:
            status = rebalance_status(admin.metadata())
            if status is None or status["proposal_id"] != proposal_id:
                raise fail(f"rebalance {proposal_id} is gone from the metadata log")
            line = progress_line(status)
            if drawing:
                bar.update(completed=finished(status), total=status["moves"],
                           detail=f"{status['in_flight']} in flight, {status['pending']} "
                           f"pending  {status['state']}")  # fmt: skip
            elif not quiet and line != last:
                typer.echo(line)
                last = line
            if status["state"] in ("COMPLETED", "STOPPED"):
                return status
            time.sleep(1.0)


def plan_lines(planned: Proposal) -> list[str]:
    s = planned.summary
    lines = [
        f"Goals: {', '.join(planned.goals)}"
        + (f"; draining nodes {list(planned.remove)}" if planned.remove else ""),
        f"Partitions to change: {len(planned.changed)}; replica moves: {s.moves} "
        f"(lower bound {s.lower_bound}); preferred-leader changes: {s.leader_changes}",
        "",
        f"{'NODE':>6} {'REPLICAS':>10} {'':>2} {'AFTER':>6} {'LEADERS':>9} {'':>2} {'AFTER':>6}",
    ]
    for n in s.replicas_before:
        lines.append(
            f"{n:>6} {s.replicas_before[n]:>10} -> {s.replicas_after[n]:>6} "
            f"{s.leaders_before[n]:>9} -> {s.leaders_after[n]:>6}"
        )
    if not planned.changed:
        lines.append("")
        lines.append("The cluster already meets the goals: nothing to move.")
    return lines


def finished(status: dict[str, Any]) -> int:
    """Moves that are over: done, or left alone because something else changed them."""
    return int(status["done"] + status["diverged"])


def progress_line(status: dict[str, Any]) -> str:
    total = max(1, status["moves"])
    filled = BAR * finished(status) // total
    bar = "#" * filled + "." * (BAR - filled)
    return (f"[{bar}] {finished(status)}/{status['moves']} done, {status['in_flight']} in flight, "
            f"{status['pending']} pending  {status['state']}")  # fmt: skip


def status_lines(status: dict[str, Any]) -> list[str]:
    limits = status["limits"]
    lines = [
        f"Rebalance {status['proposal_id']}: {status['state']}",
        progress_line(status),
        f"Limits: {limits['max_concurrent_moves_per_node']} per node, "
        f"{limits['max_concurrent_moves']} in total, "
        f"{limits['max_concurrent_leader_moves']} leader moves per step",
    ]
    if status["in_flight_per_node"]:
        per_node = ", ".join(f"{n}: {c}" for n, c in status["in_flight_per_node"].items())
        lines.append(f"Moving per node: {per_node}")
    if status["remove_nodes"]:
        lines.append(f"Draining nodes: {status['remove_nodes']}")
    if status["diverged"]:
        lines.append(f"Left alone (changed by something else): {status['diverged']}")
    if status["message"]:
        lines.append(f"Note: {status['message']}")
    return lines
