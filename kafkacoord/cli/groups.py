"""``kafkacoord groups``: kafka-consumer-groups for kafkacoord's group coordinator."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated

import typer

from kafkacoord.cli.as_of import WarehouseOption
from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    exit_code,
    fail,
    resolve_settings,
)
from kafkacoord.cli.completion import complete_groups, complete_topics
from kafkacoord.cli.group_documents import group_document
from kafkacoord.cli.group_sources import GroupSource, as_of_source, live_source
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.cli.render import table
from kafkacoord.client import GroupAdmin
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.groups.consumer_protocol import assigned_partitions
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.storage.errors import StorageError

groups_app = typer.Typer(
    help="List, describe, delete groups and manage their offsets.", no_args_is_help=True
)
GroupOption = Annotated[
    str, typer.Option("--group", "-g", help="Group id.", autocompletion=complete_groups)
]
TP = tuple[str, int]


@contextlib.contextmanager
def group_session(
    config: Path | None, bootstrap: str | None, kafka_config: Path | None
) -> Iterator[tuple[GroupAdmin, str]]:
    settings = resolve_settings(config, bootstrap, kafka_config)
    servers = settings.kafka_bootstrap(settings.bootstrap or "")
    try:
        with GroupAdmin(
            servers,
            topic_prefix=settings.topic_prefix,
            offsets_partitions=settings.offsets_partitions,
            tls=settings.client_tls(),
            timeout_s=settings.request_timeout_ms / 1000,
        ) as admin:
            yield admin, servers
    except RequestError as exc:
        fail(str(exc), exit_code(exc.code))
    except (TimeoutError, StorageError) as exc:
        fail(str(exc), ExitCode.UNREACHABLE)


@groups_app.command("list")
def groups_list(
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only groups in these states.")
    ] = None,
    group_type: Annotated[
        bool, typer.Option("--type", help="Show each group's type (Classic or Consumer).")
    ] = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """List groups (with --state, their states too; with --type, their types)."""
    with group_session(config, bootstrap, kafka_config) as (admin, _):
        groups = admin.list_groups(state or ())
    if output is OutputFormat.json:
        print_json({"groups": [
            {"group_id": gr.group_id, "type": gr.group_type.capitalize(), "state": gr.state}
            for gr in groups
        ]})  # fmt: skip
        return
    if not state and not group_type:
        for group in groups:
            typer.echo(group.group_id)
        return
    header = ("GROUP", *(("TYPE",) if group_type else ()), *(("STATE",) if state else ()))
    rows = [
        (gr.group_id, *((gr.group_type.capitalize(),) if group_type else ()),
         *((gr.state,) if state else ()))
        for gr in groups
    ]  # fmt: skip
    print_rows([header, *rows])


@groups_app.command("describe")
def groups_describe(
    group: GroupOption,
    members: Annotated[bool, typer.Option("--members", help="One row per member.")] = False,
    state: Annotated[bool, typer.Option("--state", help="The group's state.")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="Offsets and lag (default).")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="With --members: assignments.")
    ] = False,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The group at that instant, read from its shard of the offsets log: "
            "ISO-8601 (2026-11-28T03:12:00Z) or relative (-15m, -2h).",
        ),
    ] = None,
    warehouse: WarehouseOption = None,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Describe a group with kafka-consumer-groups' columns (as JSON: state, members and
    offsets in one document, whatever the flags); with --as-of, as it stood then."""
    if as_of is not None:
        settings = resolve_settings(config, bootstrap, kafka_config)
        kafka = settings.kafka_bootstrap(settings.bootstrap or "")
        try:
            source = as_of_source(kafka, settings.topics, group, as_of, warehouse)
            _describe(source, group, members, state, verbose, output)
        except (TimeoutError, StorageError) as exc:
            fail(str(exc), ExitCode.UNREACHABLE)
        return
    with group_session(config, bootstrap, kafka_config) as (admin, servers):
        _describe(live_source(admin, servers, group), group, members, state, verbose, output)


def _describe(
    source: GroupSource, group: str, members: bool, state: bool, verbose: bool,
    output: OutputFormat,
) -> None:  # fmt: skip
    if output is OutputFormat.json:
        print_json(group_document(source, group))
        return
    admin = source.reads
    [consumer] = admin.describe_consumer_groups([group])
    if consumer.error is ErrorCode.NONE and (state or members):
        _describe_consumer_group(consumer, source.shard, members, verbose)
        return
    [described] = admin.describe_groups([group])
    if described.error is not ErrorCode.NONE or described.state == "Dead":
        fail(f"Consumer group '{group}' does not exist{source.when}.", ExitCode.NOT_FOUND)
    committed = admin.committed(group) if not (members or state) else {}
    shard = source.shard
    rows: list[tuple[str, ...]]
    if state:
        rows = [
            ("GROUP", "TYPE", "COORDINATOR (SHARD)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
            (
                group,
                "Classic",
                str(shard),
                described.protocol or "",
                described.state,
                str(len(described.members)),
            ),
        ]
        print_rows(rows)
        return
    if members:
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:
            header.append("ASSIGNMENT")
        rows = [tuple(header)]
        for m in described.members:
            parts = assigned_partitions(m.assignment)
            row = [
                group,
                m.member_id,
                m.group_instance_id or "-",
                m.client_host,
                m.client_id,
                str(len(parts)),
            ]
            if verbose:
                row.append(",".join(f"{t}:{p}" for t, p in parts) or "-")
            rows.append(tuple(row))
        print_rows(rows)
        return
    owners: dict[TP, tuple[str, str, str]] = {}
    for m in described.members:
        for tp in assigned_partitions(m.assignment):
            owners[tp] = (m.member_id, m.client_host, m.client_id)
    partitions = sorted(set(committed) | set(owners))
    ends = source.ends(partitions) if partitions else {}
    rows = [
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        )
    ]
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        lag = "-" if current is None or end is None else str(max(end - current, 0))
        member, host, client = owners.get(tp, ("-", "-", "-"))
        rows.append(
            (
                group,
                tp[0],
                str(tp[1]),
                "-" if current is None else str(current),
                "-" if end is None else str(end),
                lag,
                member,
                host,
                client,
            )
        )
    if len(rows) == 1:
        typer.echo(
            f"Consumer group '{group}' has no active members and no committed offsets{source.when}."
        )
        return
    print_rows(rows)


def _describe_consumer_group(
    group: g.DescribedConsumerGroup, shard: int, members: bool, verbose: bool
) -> None:
    """Kafka 4's columns for a consumer (KIP-848) group: its epochs, and each member's
    epoch, state and assignment (with --verbose, its target too)."""
    if not members:
        print_rows([
            ("GROUP", "TYPE", "COORDINATOR (SHARD)", "ASSIGNMENT-STRATEGY", "STATE",
             "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
            (group.group_id, "Consumer", str(shard), group.assignor_name, group.state,
             str(group.group_epoch), str(group.assignment_epoch), str(len(group.members))),
        ])  # fmt: skip
        return
    header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
              "CURRENT-EPOCH", "MEMBER-STATE", "CURRENT-ASSIGNMENT"]  # fmt: skip
    if verbose:
        header += ["TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows: list[Sequence[str]] = [header]
    for m in group.members:
        row = [group.group_id, m.member_id, m.instance_id or "-", m.client_host, m.client_id,
               str(sum(len(a.partitions) for a in m.assignment)), str(m.member_epoch),
               m.state, _render(m.assignment)]  # fmt: skip
        if verbose:
            row += [str(group.assignment_epoch), _render(m.target_assignment)]
        rows.append(row)
    print_rows(rows)


def _render(assignment: list[g.HeartbeatTopicPartitions]) -> str:
    return ",".join(f"{a.topic}:{p}" for a in assignment for p in a.partitions) or "-"


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    for line in table(rows):
        typer.echo(line)


@groups_app.command("delete")
def groups_delete(
    group: GroupOption,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Delete an empty group and its offsets."""
    with group_session(config, bootstrap, kafka_config) as (admin, _):
        result = admin.delete_groups([group])[group]
    if result is not ErrorCode.NONE:
        fail(f"Deletion of group '{group}' failed: {result.name}", exit_code(result))
    typer.echo(f"Deletion of requested consumer groups ('{group}') was successful.")


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` as kafka-consumer-groups takes them."""
    topic, sep, parts = spec.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",")]
    except ValueError:
        fail(f"--topic expects TOPIC or TOPIC:P1,P2, got {spec!r}", ExitCode.USAGE)
        raise


@groups_app.command("delete-offsets")
def groups_delete_offsets(
    group: GroupOption,
    topic: Annotated[
        list[str],
        typer.Option("--topic", help="TOPIC or TOPIC:P1,P2.", autocompletion=complete_topics),
    ],
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Delete committed offsets of topics the group no longer consumes."""
    with group_session(config, bootstrap, kafka_config) as (admin, _):
        committed = admin.committed(group)
        partitions: list[TP] = []
        for spec in topic:
            name, parts = parse_topic_spec(spec)
            partitions += (
                [(name, p) for p in parts]
                if parts is not None
                else [tp for tp in committed if tp[0] == name]
            )
        results = admin.delete_offsets(group, partitions)
    rows = [("TOPIC", "PARTITION", "STATUS")]
    for (t, p), error in sorted(results.items()):
        rows.append(
            (t, str(p), "Successful" if error is ErrorCode.NONE else f"Error: {error.name}")
        )
    print_rows(rows)
    if any(e is not ErrorCode.NONE for e in results.values()):
        raise typer.Exit(1)
