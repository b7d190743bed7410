"""``kafkacoord explain group``: a group's rebalances and the admin actions on it, in
order, each with its cause."""

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
from kafkacoord.cli.completion import complete_groups
from kafkacoord.cli.explain import JsonFlag, SinceOption, explain_app
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.client.group_explanations import GroupStep
from kafkacoord.client.group_log import group_steps


@explain_app.command("group")
def explain_group(
    group: Annotated[
        str, typer.Option("--group", "-g", help="The group id.", autocompletion=complete_groups)
    ],
    since: SinceOption = None,
    as_json: JsonFlag = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """The group's steps in order: each new generation (classic) or epoch (consumer
    protocol) with its member count and cause, and each audited admin action (offset
    resets and deletes, group deletes) with who did it, read from its offsets shard."""
    since_ms = None if since is None else parse_as_of(since, int(time.time() * 1000), "--since")
    with admin_session(config, bootstrap, kafka_config) as admin:
        steps = group_steps(admin.bootstrap, admin.topics, group)
    if not steps:
        fail(f"Group {group!r} has no record in the offsets log.", ExitCode.NOT_FOUND)
    shown = [s for s in steps if since_ms is None or s.time_ms >= since_ms]
    if as_json or output is OutputFormat.json:
        print_json(explain_group_document(group, shown))
        return
    for step in shown:
        typer.echo(step.text)


def explain_group_document(group: str, steps: list[GroupStep]) -> dict[str, Any]:
    """``explain group``'s JSON answer (schemas/explain-group.json)."""
    return {"group": group, "steps": [s.as_dict() for s in steps]}
