"""``kafkacoord explain``: why the cluster is as it is, decision by decision."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from kafkacoord.cli.as_of import parse_as_of
from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    admin_session,
    fail,
)
from kafkacoord.cli.completion import complete_topics
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.client.explanations import PartitionStep
from kafkacoord.client.metadata_history import partition_history

explain_app = typer.Typer(
    help="Why things are as they are: each decision in order, with its cause.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="The same as --output json.")]

SinceOption = Annotated[
    str | None,
    typer.Option("--since", help="Only decisions from then: ISO-8601 or relative (-1h)."),
]


@explain_app.command("partition")
def explain_partition(
    topic: Annotated[
        str, typer.Option("--topic", "-t", help="The topic.", autocompletion=complete_topics)
    ],
    partition: Annotated[int, typer.Option("--partition", "-p", help="The partition.")],
    since: SinceOption = None,
    as_json: JsonFlag = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """The partition's decisions in order: when, what changed (leader, ISR, ELR, replicas,
    epochs), and the cause each carries, read from the metadata log."""
    since_ms = None if since is None else parse_as_of(since, int(time.time() * 1000), "--since")
    with admin_session(config, bootstrap, kafka_config) as admin:
        steps = partition_history(admin.bootstrap, admin.topics, topic, partition, since_ms)
        if not steps and since_ms is None:
            fail(f"Partition {topic}-{partition} has no record in the metadata log.",
                 ExitCode.NOT_FOUND)  # fmt: skip
    if as_json or output is OutputFormat.json:
        print_json(explain_partition_document(topic, partition, steps))
        return
    for step in steps:
        typer.echo(step.text)


def explain_partition_document(
    topic: str, partition: int, steps: list[PartitionStep]
) -> dict[str, Any]:
    """``explain partition``'s JSON answer (schemas/explain-partition.json)."""
    return {"topic": topic, "partition": partition, "decisions": [s.as_dict() for s in steps]}
