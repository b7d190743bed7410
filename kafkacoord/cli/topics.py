"""``kafkacoord topics``, after kafka-topics: create, list, describe, delete, add-partitions;
and alter-configs, after kafka-configs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kafkacoord.cli.as_of import AsOfOption, WarehouseOption, metadata_image
from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    TopicOption,
    admin_session,
    fail,
    parse_configs,
    parse_replica_assignment,
)
from kafkacoord.cli.completion import complete_topics
from kafkacoord.cli.documents import topic_descriptions, topic_list
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.cli.render import PartitionFilter, describe_topics, select_partitions, table
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api

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
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Create a topic; placement follows Kafka's AdminUtils."""
    assignment = None
    if replica_assignment is not None:
        assignment = dict(enumerate(parse_replica_assignment(replica_assignment)))
    with admin_session(config, bootstrap, kafka_config) as admin:
        try:
            created = admin.create_topic(
                topic, partitions, replication_factor, replica_assignment=assignment,
                configs=parse_configs(config_entry or []), rack_aware=not disable_rack_aware,
            )  # fmt: skip
        except RequestError as exc:
            if not (if_not_exists and exc.code is ErrorCode.TOPIC_ALREADY_EXISTS):
                raise
            typer.echo(f"Topic {topic} already exists: left as it is.")
            return
    typer.echo(f"Created topic {topic}.")
    for partition, replicas in sorted(created.assignment.items()):
        typer.echo(f"\tPartition: {partition}\tReplicas: {','.join(map(str, replicas))}")


@topics_app.command("list")
def topics_list(
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """List topic names."""
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = admin.metadata()
    if output is OutputFormat.json:
        print_json(topic_list(image))
        return
    for name in sorted(image.topics):
        typer.echo(name)


@topics_app.command("describe")
def topics_describe(
    topic: Annotated[
        str | None,
        typer.Option("--topic", "-t", help="Only this topic.", autocompletion=complete_topics),
    ] = None,
    under_replicated_partitions: Annotated[
        bool, typer.Option("--under-replicated-partitions", help="Only ISR < replicas.")
    ] = False,
    unavailable_partitions: Annotated[
        bool, typer.Option("--unavailable-partitions", help="Only leaderless partitions.")
    ] = False,
    under_min_isr_partitions: Annotated[
        bool, typer.Option("--under-min-isr-partitions", help="Only ISR < min.insync.replicas.")
    ] = False,
    configs: Annotated[
        bool,
        typer.Option("--configs", help="With --topic: each config, its default and source."),
    ] = False,
    as_of: AsOfOption = None,
    warehouse: WarehouseOption = None,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Describe topics with kafka-topics' columns; with --configs, a topic's configs as
    kafka-configs --describe --all shows them; with --as-of, as they stood then."""
    only = PartitionFilter(
        under_replicated_partitions, unavailable_partitions, under_min_isr_partitions
    )
    if configs:
        if as_of is not None:
            fail("--configs shows the present only; drop --as-of", ExitCode.USAGE)
        if topic is not None and not any(only):
            _describe_configs(topic, output, config, bootstrap, kafka_config)
            return
        fail("--configs takes --topic and no partition filter", ExitCode.USAGE)
    with admin_session(config, bootstrap, kafka_config) as admin:
        image = metadata_image(admin, as_of, warehouse)
    if topic is not None and image.topic(topic) is None:
        when = "" if as_of is None else f" at {as_of}"
        fail(f"Topic '{topic}' does not exist{when}.", ExitCode.NOT_FOUND)
    names = [topic] if topic else None
    if output is OutputFormat.json:
        print_json(topic_descriptions(select_partitions(image, names, only), any(only)))
        return
    for line in describe_topics(image, names, only):
        typer.echo(line)


def _describe_configs(
    topic: str,
    output: OutputFormat,
    config: Path | None,
    bootstrap: str | None,
    kafka_config: Path | None,
) -> None:
    with admin_session(config, bootstrap, kafka_config) as admin:
        described = admin.describe_topic_configs(topic)
    if output is OutputFormat.json:
        print_json(configs_document(topic, described))
        return
    typer.echo(f"All configs for topic {topic} are:")
    rows = [("CONFIG", "VALUE", "SOURCE", "DEFAULT")]
    rows += [(c.name, c.value, c.source, "-" if c.default is None else c.default)
             for c in described]  # fmt: skip
    for line in table(rows):
        typer.echo(f"  {line}")


def configs_document(topic: str, described: list[api.DescribedConfig]) -> dict[str, Any]:
    """``topics describe --configs --output json`` (schemas/topics-describe-configs.json)."""
    return {"topic": topic, "configs": [c.model_dump() for c in described]}


@topics_app.command("delete")
def topics_delete(
    topic: TopicOption,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Queue a topic for deletion: replicas stop, then its records are tombstoned."""
    with admin_session(config, bootstrap, kafka_config) as admin:
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
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Grow a topic to --partitions partitions."""
    assignment = (
        None if replica_assignment is None else parse_replica_assignment(replica_assignment)
    )
    with admin_session(config, bootstrap, kafka_config) as admin:
        created = admin.create_partitions(topic, partitions, assignment)
    for partition, replicas in sorted(created.assignment.items()):
        typer.echo(f"\tPartition: {partition}\tReplicas: {','.join(map(str, replicas))}")
    typer.echo(f"Topic {topic} now has {partitions} partitions.")


@topics_app.command("alter-configs")
def topics_alter_configs(
    topic: TopicOption,
    add_config: Annotated[
        list[str] | None, typer.Option("--add-config", help="Set key=value (repeatable).")
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="Remove a key (repeatable).")
    ] = None,
    validate_only: Annotated[
        bool, typer.Option("--validate-only", help="Check and show the result; change nothing.")
    ] = False,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Change a topic's configs (kafka-configs --alter). A new min.insync.replicas clears
    the topic's eligible leader replicas (KIP-966)."""
    if not add_config and not delete_config:
        fail("give --add-config key=value or --delete-config key", 2)
    with admin_session(config, bootstrap, kafka_config) as admin:
        result = admin.alter_topic_configs(
            topic, parse_configs(add_config or []), delete_config or [],
            validate_only=validate_only,
        )  # fmt: skip
    shown = ",".join(f"{k}={v}" for k, v in sorted(result.configs.items()))
    verb = "would be" if validate_only else "are now"
    typer.echo(f"Configs for topic {topic} {verb}: {shown or '(none)'}")
    if result.elr_cleared:
        typer.echo(f"min.insync.replicas changed: the ELR of {result.elr_cleared} partitions "
                   "was cleared.")  # fmt: skip
