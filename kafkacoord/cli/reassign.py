"""``kafkacoord reassign``, after kafka-reassign-partitions: generate, execute, verify, cancel."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    admin_session,
    fail,
)
from kafkacoord.cli.documents import reassignment_list, reassignment_verification
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.cli.reassign_files import (
    format_reassignment,
    parse_reassignment,
    parse_topics_to_move,
    propose,
)
from kafkacoord.cli.render import reassignment_lines
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.progress import on_terminal, progress_bar

reassign_app = typer.Typer(
    help="Partition reassignment, with kafka-reassign-partitions' JSON files.",
    no_args_is_help=True,
)
FileOption = Annotated[
    Path, typer.Option("--reassignment-json-file", exists=True, dir_okay=False, readable=True)
]


@reassign_app.command("generate")
def reassign_generate(
    topics_to_move_json_file: Annotated[
        Path, typer.Option(exists=True, dir_okay=False, readable=True)
    ],
    broker_list: Annotated[str, typer.Option(help="Target node ids, e.g. 4,5,6.")],
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="Ignore racks in placement.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Propose a reassignment of whole topics onto --broker-list."""
    try:
        wanted = [int(b) for b in broker_list.split(",")]
    except ValueError:
        fail(f"--broker-list expects ids like 1,2,3, got {broker_list!r}", 2)
    with admin_session(config, bootstrap, kafka_config) as admin:
        topics = parse_topics_to_move(topics_to_move_json_file.read_text())
        image = admin.metadata()
        missing = [t for t in topics if image.topic(t) is None]
        if missing:
            fail(f"unknown topics: {', '.join(missing)}", ExitCode.NOT_FOUND)
        unknown = [b for b in wanted if image.node(b) is None]
        if unknown:
            fail(f"unknown nodes in --broker-list: {unknown}", ExitCode.NOT_FOUND)
        current = {
            (v.topic, v.partition): v.replicas for t in topics for v in image.partitions_of(t)
        }
        nodes = {b: (image.node(b).rack if image.node(b) else None) for b in wanted}  # type: ignore[union-attr]
        proposal = propose(current, nodes, rack_aware=not disable_rack_aware)
    typer.echo("Current partition replica assignment")
    typer.echo(format_reassignment(current))
    typer.echo("")
    typer.echo("Proposed partition reassignment configuration")
    typer.echo(format_reassignment(proposal))


@reassign_app.command("execute")
def reassign_execute(
    reassignment_json_file: FileOption,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until every reassignment has finished.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Start the reassignments in the file (with --wait, follow them to the end)."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        image = admin.metadata()
        current = {tp: list(v.replicas) for tp in targets if (v := image.partition(*tp))}
        typer.echo("Current partition replica assignment\n")
        typer.echo(format_reassignment(current))
        typer.echo("\nSave this to use as the --reassignment-json-file option during rollback")
        results = admin.alter_reassignments(dict(targets.items()))
        _report(results, "Successfully started partition reassignment", "start reassignment")
        if wait:
            _wait(admin, targets)


def _wait(admin: ControllerAdmin, targets: dict[tuple[str, int], list[int]]) -> None:
    """Until no partition of ``targets`` is reassigning: a bar on a terminal, else a line
    per change; then as ``verify``, exit 1 unless every one ended on its target."""
    drawing = on_terminal()
    last = ""
    with progress_bar(len(targets), "Reassignment", enabled=drawing, unit="partitions") as bar:
        while True:
            verified = reassignment_verification(admin.metadata(), targets)
            counts = Counter(p["status"] for p in verified["partitions"])
            moving = counts["in_progress"]
            if drawing:
                bar.update(completed=counts["completed"], detail=f"{moving} in progress")
            else:
                line = (f"Reassignment: {counts['completed']}/{len(targets)} partitions "
                        f"completed, {moving} in progress")  # fmt: skip
                if line != last:
                    typer.echo(line)
                    last = line
            if not moving:
                break
            time.sleep(1.0)
    for p in verified["partitions"]:
        if p["status"] != "completed":
            typer.echo(_VERDICTS[p["status"]].format(**p), err=True)
    if not verified["complete"]:
        raise typer.Exit(ExitCode.FAILED)


@reassign_app.command("verify")
def reassign_verify(
    reassignment_json_file: FileOption,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Report, per partition, whether its reassignment is complete (exit 1 until it is)."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        image = admin.metadata()
    verified = reassignment_verification(image, targets)
    if output is OutputFormat.json:
        print_json(verified)
    else:
        typer.echo("Status of partition reassignment:")
        for p in verified["partitions"]:
            typer.echo(_VERDICTS[p["status"]].format(**p))
    if not verified["complete"]:
        raise typer.Exit(ExitCode.FAILED)


_VERDICTS = {
    "missing": "Partition {topic}-{partition} does not exist.",
    "completed": "Reassignment of partition {topic}-{partition} is completed.",
    "in_progress": "Reassignment of partition {topic}-{partition} is still in progress.",
    "mismatch": "There is no active reassignment of partition {topic}-{partition}, "
    "but replica set is {replicas} rather than {target_replicas}.",
}


@reassign_app.command("cancel")
def reassign_cancel(
    reassignment_json_file: FileOption,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Cancel the reassignments in the file: each partition reverts to its original replicas."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        results = admin.alter_reassignments(dict.fromkeys(targets))
    _report(results, "Successfully cancelled partition reassignment", "cancel reassignment")


@reassign_app.command("list")
def reassign_list(
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Reassignments in flight or queued."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = admin.metadata()
    if output is OutputFormat.json:
        print_json(reassignment_list(image))
        return
    for line in reassignment_lines(image):
        typer.echo(line)


def _report(results: list, done: str, verb: str) -> None:  # type: ignore[type-arg]
    failed = [r for r in results if r.error is not ErrorCode.NONE]
    for r in failed:
        typer.echo(f"Error: failed to {verb} for {r.topic}-{r.partition}: "
                   f"{r.error.name}: {r.message or ''}", err=True)  # fmt: skip
    if failed:
        raise typer.Exit(1)
    typer.echo(f"{done} for {', '.join(f'{r.topic}-{r.partition}' for r in results)}")
