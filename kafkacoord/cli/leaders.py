"""``kafkacoord elect-leaders`` (after kafka-leader-election) and ``shutdown-node``."""

from __future__ import annotations

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
from kafkacoord.cli.completion import complete_topics
from kafkacoord.cli.documents import election_results
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.coordinator.protocol import ErrorCode


def elect_leaders(
    election_type: Annotated[str, typer.Option(help="preferred or unclean.")],
    topic: Annotated[
        str | None, typer.Option(help="Topic of --partition.", autocompletion=complete_topics)
    ] = None,
    partition: Annotated[int | None, typer.Option(help="Partition of --topic.")] = None,
    all_topic_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition.")
    ] = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Elect leaders (kafka-leader-election); exit 1 if any election failed."""
    if election_type not in ("preferred", "unclean"):
        fail("--election-type must be preferred or unclean", 2)
    if all_topic_partitions == (topic is not None):
        fail("give either --topic T --partition P or --all-topic-partitions", 2)
    if topic is not None and partition is None:
        fail("--topic needs --partition", 2)
    targets = None if all_topic_partitions else [(topic or "", partition or 0)]
    with admin_session(config, bootstrap, kafka_config) as admin:
        results = admin.elect_leaders(election_type, targets)
    if output is OutputFormat.json:
        document = election_results(election_type, results)
        print_json(document)
        if any(p["outcome"] == "failed" for p in document["partitions"]):
            raise typer.Exit(ExitCode.FAILED)
        return
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
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Controlled shutdown: move the node's leaderships away and shrink its ISRs."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        remaining = admin.shutdown_node(node_id)
    if remaining:
        names = ", ".join(f"{r.topic}-{r.partition}" for r in remaining)
        typer.echo(f"Node {node_id} still leads partitions with no other live ISR member: {names}")
        raise typer.Exit(1)
    typer.echo(f"Node {node_id} leads no partitions; it can be stopped.")
