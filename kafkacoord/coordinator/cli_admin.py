"""Admin commands, following the Kafka tools: topics, nodes, reassign, elect-leaders."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from kafkacoord.coordinator.admin import ControllerAdmin
from kafkacoord.coordinator.admin.reassign_files import (
    ReassignmentFileError,
    format_reassignment,
    parse_reassignment,
    parse_topics_to_move,
    propose,
)
from kafkacoord.coordinator.admin.render import describe_topics, node_table, reassignment_lines
from kafkacoord.coordinator.clients.errors import RequestError
from kafkacoord.coordinator.controller.placement import AdminOperationError
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.settings import Settings, load_settings

BOOTSTRAP_FILE = "bootstrap"

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML config file (also $KAFKACOORD_CONFIG).")
]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server", "--bootstrap", "-b",
        help="Kafka bootstrap servers (also $KAFKACOORD_BOOTSTRAP); defaults to the "
        "embedded broker of a local daemon.",
    ),
]  # fmt: skip
TopicOption = Annotated[str, typer.Option("--topic", "-t", help="Topic name.")]


def resolve_settings(config: Path | None, bootstrap: str | None) -> Settings:
    try:
        settings = load_settings(config, bootstrap=bootstrap)
    except (ValidationError, FileNotFoundError) as exc:
        fail(f"invalid configuration: {exc}", 2)
    if settings.bootstrap is None:
        written = settings.data_dir / BOOTSTRAP_FILE
        if not written.is_file():
            fail("no broker: pass --bootstrap-server, set KAFKACOORD_BOOTSTRAP, or start "
                 "a local daemon (./dev.sh daemon)", 2)  # fmt: skip
        settings = load_settings(config, bootstrap=written.read_text().strip())
    return settings


def fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def admin_session(config: Path | None, bootstrap: str | None) -> Iterator[ControllerAdmin]:
    settings = resolve_settings(config, bootstrap)
    try:
        with ControllerAdmin(
            settings.bootstrap or "", settings.topics,
            tls=settings.client_tls(),
        ) as admin:  # fmt: skip
            yield admin
    except RequestError as exc:
        fail(exc.message or exc.code.name if exc.code is not ErrorCode.NONE else str(exc))
    except (TimeoutError, ReassignmentFileError, AdminOperationError) as exc:
        fail(str(exc))


def _configs(pairs: list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--config expects key=value, got {pair!r}", 2)
        configs[key] = value
    return configs


def _replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' ``--replica-assignment 1:2,2:3``: partitions by comma, replicas by colon."""
    try:
        return [[int(r) for r in part.split(":")] for part in text.split(",")]
    except ValueError:
        fail(f"--replica-assignment expects e.g. 1:2:3,2:3:1, got {text!r}", 2)
        raise


# -- topics ---------------------------------------------------------------------------

topics_app = typer.Typer(
    help="Create, list, describe, delete and grow topics.", no_args_is_help=True
)


@topics_app.command("create")
def topics_create(
    topic: TopicOption,
    partitions: Annotated[int, typer.Option(help="Partition count (num.partitions).")] = -1,
    replication_factor: Annotated[
        int, typer.Option(help="Replicas per partition (default.replication.factor).")
    ] = -1,
    config_entry: Annotated[
        list[str] | None, typer.Option("--config-entry", help="Topic config key=value.")
    ] = None,
    replica_assignment: Annotated[
        str | None, typer.Option(help="Explicit placement, e.g. 1:2:3,2:3:1.")
    ] = None,
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="Ignore racks in placement.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Create a topic; placement follows Kafka's AdminUtils."""
    assignment = None
    if replica_assignment is not None:
        assignment = dict(enumerate(_replica_assignment(replica_assignment)))
    with admin_session(config, bootstrap) as admin:
        created = admin.create_topic(
            topic, partitions, replication_factor, replica_assignment=assignment,
            configs=_configs(config_entry or []), rack_aware=not disable_rack_aware,
        )  # fmt: skip
    typer.echo(f"Created topic {topic}.")
    for partition, replicas in sorted(created.assignment.items()):
        typer.echo(f"\tPartition: {partition}\tReplicas: {','.join(map(str, replicas))}")


@topics_app.command("list")
def topics_list(config: ConfigOption = None, bootstrap: BootstrapOption = None) -> None:
    """List topic names."""
    with admin_session(config, bootstrap) as admin:
        image = admin.metadata()
    for name in sorted(image.topics):
        typer.echo(name)


@topics_app.command("describe")
def topics_describe(
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    under_replicated_partitions: Annotated[
        bool, typer.Option("--under-replicated-partitions", help="Only ISR < replicas.")
    ] = False,
    unavailable_partitions: Annotated[
        bool, typer.Option("--unavailable-partitions", help="Only leaderless partitions.")
    ] = False,
    under_min_isr_partitions: Annotated[
        bool, typer.Option("--under-min-isr-partitions", help="Only ISR < min.insync.replicas.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Describe topics with kafka-topics' columns."""
    with admin_session(config, bootstrap) as admin:
        image = admin.metadata()
    if topic is not None and image.topic(topic) is None:
        fail(f"Topic '{topic}' does not exist.")
    for line in describe_topics(
        image, [topic] if topic else None, under_replicated=under_replicated_partitions,
        unavailable=unavailable_partitions, under_min_isr=under_min_isr_partitions,
    ):  # fmt: skip
        typer.echo(line)


@topics_app.command("delete")
def topics_delete(
    topic: TopicOption, config: ConfigOption = None, bootstrap: BootstrapOption = None
) -> None:
    """Queue a topic for deletion: replicas stop, then its records are tombstoned."""
    with admin_session(config, bootstrap) as admin:
        admin.delete_topic(topic)
    typer.echo(f"Topic {topic} is marked for deletion.")


@topics_app.command("add-partitions")
def topics_add_partitions(
    topic: TopicOption,
    partitions: Annotated[int, typer.Option(help="The new total partition count.")],
    replica_assignment: Annotated[
        str | None, typer.Option(help="Replicas of the new partitions, e.g. 1:2,2:3.")
    ] = None,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Grow a topic to --partitions partitions."""
    assignment = None if replica_assignment is None else _replica_assignment(replica_assignment)
    with admin_session(config, bootstrap) as admin:
        created = admin.create_partitions(topic, partitions, assignment)
    for partition, replicas in sorted(created.assignment.items()):
        typer.echo(f"\tPartition: {partition}\tReplicas: {','.join(map(str, replicas))}")
    typer.echo(f"Topic {topic} now has {partitions} partitions.")


# -- nodes ----------------------------------------------------------------------------

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


# -- reassign -------------------------------------------------------------------------

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
) -> None:
    """Propose a reassignment of whole topics onto --broker-list."""
    try:
        wanted = [int(b) for b in broker_list.split(",")]
    except ValueError:
        fail(f"--broker-list expects ids like 1,2,3, got {broker_list!r}", 2)
    with admin_session(config, bootstrap) as admin:
        topics = parse_topics_to_move(topics_to_move_json_file.read_text())
        image = admin.metadata()
        missing = [t for t in topics if image.topic(t) is None]
        if missing:
            fail(f"unknown topics: {', '.join(missing)}")
        unknown = [b for b in wanted if image.node(b) is None]
        if unknown:
            fail(f"unknown nodes in --broker-list: {unknown}")
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
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Start the reassignments in the file."""
    with admin_session(config, bootstrap) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        image = admin.metadata()
        current = {tp: list(v.replicas) for tp in targets if (v := image.partition(*tp))}
        typer.echo("Current partition replica assignment\n")
        typer.echo(format_reassignment(current))
        typer.echo("\nSave this to use as the --reassignment-json-file option during rollback")
        results = admin.alter_reassignments(dict(targets.items()))
    _report(results, "Successfully started partition reassignment", "start reassignment")


@reassign_app.command("verify")
def reassign_verify(
    reassignment_json_file: FileOption,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Report, per partition, whether its reassignment is complete."""
    with admin_session(config, bootstrap) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        image = admin.metadata()
    pending = False
    typer.echo("Status of partition reassignment:")
    for (topic, partition), replicas in sorted(targets.items()):
        value = image.partition(topic, partition)
        if value is None:
            typer.echo(f"Partition {topic}-{partition} does not exist.")
            pending = True
        elif value.reassignment is None and list(value.replicas) == replicas:
            typer.echo(f"Reassignment of partition {topic}-{partition} is completed.")
        elif value.reassignment is not None:
            typer.echo(f"Reassignment of partition {topic}-{partition} is still in progress.")
            pending = True
        else:
            typer.echo(
                f"There is no active reassignment of partition {topic}-{partition}, "
                f"but replica set is {list(value.replicas)} rather than {replicas}."
            )
            pending = True
    if pending:
        raise typer.Exit(1)


@reassign_app.command("cancel")
def reassign_cancel(
    reassignment_json_file: FileOption,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Cancel the reassignments in the file: each partition reverts to its original replicas."""
    with admin_session(config, bootstrap) as admin:
        targets = parse_reassignment(reassignment_json_file.read_text())
        results = admin.alter_reassignments(dict.fromkeys(targets))
    _report(results, "Successfully cancelled partition reassignment", "cancel reassignment")


@reassign_app.command("list")
def reassign_list(config: ConfigOption = None, bootstrap: BootstrapOption = None) -> None:
    """Reassignments in flight or queued."""
    with admin_session(config, bootstrap) as admin:
        image = admin.metadata()
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


# -- leaders and shutdown -----------------------------------------------------------------


def elect_leaders(
    election_type: Annotated[str, typer.Option(help="preferred or unclean.")],
    topic: Annotated[str | None, typer.Option(help="Topic of --partition.")] = None,
    partition: Annotated[int | None, typer.Option(help="Partition of --topic.")] = None,
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Elect leaders (kafka-leader-election)."""
    if election_type not in ("preferred", "unclean"):
        fail("--election-type must be preferred or unclean", 2)
    if all_topic_partitions == (topic is not None):
        fail("give either --topic T --partition P or --all-topic-partitions", 2)
    if topic is not None and partition is None:
        fail("--topic needs --partition", 2)
    targets = None if all_topic_partitions else [(topic or "", partition or 0)]
    with admin_session(config, bootstrap) as admin:
        results = admin.elect_leaders(election_type, targets)
    if not results:
        typer.echo("No partition needed a leader election.")
        return
    elected = [r for r in results if r.error is ErrorCode.NONE]
    not_needed = [r for r in results if r.error is ErrorCode.ELECTION_NOT_NEEDED]
    failed = [r for r in results if r.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
    if elected:
        names = ", ".join(f"{r.topic}-{r.partition}" for r in elected)
        typer.echo(
            f"Successfully completed leader election ({election_type}) for partitions {names}"
        )
    if not_needed:
        names = ", ".join(f"{r.topic}-{r.partition}" for r in not_needed)
        typer.echo(f"Valid replica already elected for partitions {names}")
    for r in failed:
        typer.echo(
            f"Error completing leader election ({election_type}) for partition "
            f"{r.topic}-{r.partition}: {r.error.name}: {r.message or ''}",
            err=True,
        )
    if failed:
        raise typer.Exit(1)


def shutdown_node(
    node_id: Annotated[int, typer.Argument(help="Node id.")],
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Controlled shutdown: move the node's leaderships away and shrink its ISRs."""
    with admin_session(config, bootstrap) as admin:
        remaining = admin.shutdown_node(node_id)
    if remaining:
        names = ", ".join(f"{r.topic}-{r.partition}" for r in remaining)
        typer.echo(f"Node {node_id} still leads partitions with no other live ISR member: {names}")
        raise typer.Exit(1)
    typer.echo(f"Node {node_id} leads no partitions; it can be stopped.")


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")
    app.add_typer(nodes_app, name="nodes")
    app.add_typer(reassign_app, name="reassign")
    app.command("elect-leaders")(elect_leaders)
    app.command("shutdown-node")(shutdown_node)
    from kafkacoord.coordinator.cli_groups import groups_app

    app.add_typer(groups_app, name="groups")
    # The views commands import Spark only when they run, so this costs nothing.
    from kafkacoord.spark.cli import views_app

    app.add_typer(views_app, name="views")
