"""``kafkacoord groups reset-offsets``: kafka-consumer-groups --reset-offsets, with its
scenarios, its CSV (``--export``, ``--from-file``) and its group scopes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import Consumer, TopicPartition

from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    exit_code,
    fail,
)
from kafkacoord.cli.groups import group_session, groups_app, parse_topic_spec, print_rows
from kafkacoord.cli.output import OutputFormat, OutputOption, print_json
from kafkacoord.cli.reset_files import ResetFileError, format_reset_plans, parse_reset_plans
from kafkacoord.client import GroupAdmin
from kafkacoord.client.classic_member import broker_partition_counts
from kafkacoord.client.offset_reset import (
    ResetMode,
    at_timestamps,
    clamp,
    parse_datetime_ms,
    parse_duration,
    reset_plan,
)
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.progress import on_terminal, progress_bar
from kafkacoord.storage.clients import base_config
from kafkacoord.storage.watermarks import EndOffsetProbe

TP = tuple[str, int]
# Kafka resets a group only while nobody consumes for it; Dead: no such group yet.
_RESETTABLE = frozenset({"Empty", "Dead"})


@dataclass(frozen=True)
class Scenario:
    """One of Kafka's reset scenarios, as the options gave it."""

    mode: ResetMode | None = None  # reset_plan's modes
    value: int = 0
    timestamp_ms: int | None = None  # --to-datetime, --by-duration
    file_plans: dict[str, dict[TP, int]] | None = None  # --from-file


@dataclass
class Outcome:
    plans: dict[str, dict[TP, int]] = field(default_factory=dict)
    errors: dict[str, dict[TP, ErrorCode]] = field(default_factory=dict)
    # Groups not reset, with why and the exit code it means.
    skipped: dict[str, tuple[str, ExitCode]] = field(default_factory=dict)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: Annotated[
        list[str] | None, typer.Option("--group", "-g", help="Group id (repeatable).")
    ] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every group.")] = False,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="TOPIC or TOPIC:P1,P2 (repeatable).")
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group committed for.")
    ] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="The log start.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="The log end.")] = False,
    to_current: Annotated[
        bool, typer.Option("--to-current", help="The committed offset (the log end if none).")
    ] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="This offset.")] = None,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            help="First offset at or after, e.g. 2026-11-01T12:00:00.000 (UTC unless a zone).",
        ),
    ] = None,
    by_duration: Annotated[
        str | None,
        typer.Option("--by-duration", help="First offset at or after now minus, e.g. PT15M."),
    ] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="The committed offset plus N.")
    ] = None,
    from_file: Annotated[
        Path | None, typer.Option("--from-file", help="A CSV plan, as --export writes it.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show the plan (the default).")
    ] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the plan.")] = False,
    export: Annotated[
        bool, typer.Option("--export", help="Print the plan as Kafka's CSV, for --from-file.")
    ] = False,
    output: OutputOption = OutputFormat.table,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Reset committed offsets of empty groups. Prints the plan; applies it with --execute."""
    if dry_run and execute:
        fail("give only one of --execute and --dry-run", ExitCode.USAGE)
    if bool(group) == all_groups:
        fail("give --group (repeatable) or --all-groups", ExitCode.USAGE)
    if export and output is OutputFormat.json:
        fail("give only one of --export and --output json", ExitCode.USAGE)
    single_group = group[0] if group and len(group) == 1 else None
    scenario = _scenario(
        to_earliest=to_earliest, to_latest=to_latest, to_current=to_current,
        to_offset=to_offset, to_datetime=to_datetime, by_duration=by_duration,
        shift_by=shift_by, from_file=from_file, single_group=single_group,
    )  # fmt: skip
    if scenario.file_plans is None and bool(topic) == all_topics:
        fail("give either --topic or --all-topics", ExitCode.USAGE)
    with group_session(config, bootstrap, kafka_config) as (admin, servers):
        groups = list(dict.fromkeys(group or [g.group_id for g in admin.list_groups()]))
        outcome = _plan(admin, servers, groups, scenario, topic or [], all_topics)
        if execute:
            total = sum(len(plan) for plan in outcome.plans.values())
            watched = on_terminal(json_output=output is OutputFormat.json)
            with progress_bar(
                total, "Resetting offsets", enabled=watched, unit="partitions"
            ) as bar:
                outcome.errors = apply_plans(admin, outcome.plans, on_progress=bar.advance)
    _print_outcome(outcome, execute=execute, export=export, output=output,
                   with_group=single_group is None)  # fmt: skip
    if not (dry_run or execute):
        typer.echo("(dry run: add --execute to apply)", err=True)
    _exit_on_failures(outcome)


def _scenario(
    *,
    to_earliest: bool,
    to_latest: bool,
    to_current: bool,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None,
    from_file: Path | None,
    single_group: str | None,
) -> Scenario:
    given = {
        "--to-earliest": to_earliest, "--to-latest": to_latest, "--to-current": to_current,
        "--to-offset": to_offset is not None, "--to-datetime": to_datetime is not None,
        "--by-duration": by_duration is not None, "--shift-by": shift_by is not None,
        "--from-file": from_file is not None,
    }  # fmt: skip
    if sum(given.values()) != 1:
        fail(f"give exactly one of {', '.join(given)}", ExitCode.USAGE)
    if to_datetime is not None:
        try:
            return Scenario(timestamp_ms=parse_datetime_ms(to_datetime))
        except ValueError as exc:
            fail(f"--to-datetime: {exc}", ExitCode.USAGE)
    if by_duration is not None:
        try:
            duration = parse_duration(by_duration)
        except ValueError as exc:
            fail(f"--by-duration: {exc}", ExitCode.USAGE)
        now_us = time.time_ns() // 1000
        return Scenario(timestamp_ms=(now_us - duration // timedelta(microseconds=1)) // 1000)
    if from_file is not None:
        try:
            plans = parse_reset_plans(from_file.read_text(), single_group)
        except OSError as exc:
            fail(f"--from-file: {exc}", ExitCode.USAGE)
        except ResetFileError as exc:
            fail(f"--from-file {from_file}: {exc}", ExitCode.USAGE)
        return Scenario(file_plans=plans)
    if to_offset is not None:
        return Scenario(mode="offset", value=to_offset)
    if shift_by is not None:
        return Scenario(mode="shift", value=shift_by)
    return Scenario(mode="earliest" if to_earliest else "latest" if to_latest else "current")


def _plan(
    admin: GroupAdmin,
    servers: str,
    groups: list[str],
    scenario: Scenario,
    topics: list[str],
    all_topics: bool,
) -> Outcome:
    outcome = Outcome()
    counts = broker_partition_counts(servers)
    with EndOffsetProbe(servers, client_id="kafkacoord-reset") as probe:
        for described in admin.describe_groups(groups):
            name = described.group_id
            if described.error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                why = f"cannot describe group '{name}': {described.error.name}"
                outcome.skipped[name] = (why, exit_code(described.error))
                continue
            if described.error is ErrorCode.NONE and described.state not in _RESETTABLE:
                why = (f"Assignments can only be reset if the group '{name}' is inactive, "
                       f"but the current state is {described.state}.")  # fmt: skip
                outcome.skipped[name] = (why, ExitCode.REFUSED)
                continue
            committed = {tp: p.offset for tp, p in admin.committed(name).items()}
            if scenario.file_plans is not None:
                if name not in scenario.file_plans:
                    why = f"No reset plan for group {name} found"
                    outcome.skipped[name] = (why, ExitCode.NOT_FOUND)
                    continue
                requested = scenario.file_plans[name]
                partitions = _existing(counts, sorted(requested))
            elif all_topics:
                partitions = sorted(committed)
            else:
                partitions = _existing(counts, _topic_partitions(counts, topics))
            starts, ends = probe.earliest(partitions), probe.latest(partitions)
            if scenario.file_plans is not None:
                plan = clamp(scenario.file_plans[name], starts, ends)
            elif scenario.timestamp_ms is not None:
                found = _offsets_at(servers, partitions, scenario.timestamp_ms)
                plan = at_timestamps(found, ends)
            else:
                assert scenario.mode is not None
                try:
                    plan = reset_plan(scenario.mode, partitions, committed=committed,
                                      starts=starts, ends=ends, value=scenario.value)  # fmt: skip
                except ValueError as exc:
                    fail(str(exc), ExitCode.USAGE)
            outcome.plans[name] = plan
    return outcome


def apply_plans(
    admin: GroupAdmin,
    plans: Mapping[str, Mapping[TP, int]],
    on_progress: Callable[[int], None] | None = None,
) -> dict[str, dict[TP, ErrorCode]]:
    """--execute: commit each group's plan as an admin; the partitions that failed.
    ``on_progress`` hears of each chunk of partitions as it lands."""
    errors: dict[str, dict[TP, ErrorCode]] = {}
    for group, plan in plans.items():
        if not plan:
            continue
        answers = admin.reset_offsets(group, plan, on_progress=on_progress)
        failed: dict[TP, ErrorCode] = {
            tp: e for tp, e in answers.items() if e is not ErrorCode.NONE
        }
        if failed:
            errors[group] = failed
    return errors


def _topic_partitions(counts: Any, topics: list[str]) -> list[TP]:
    chosen: list[TP] = []
    for spec in topics:
        name, parts = parse_topic_spec(spec)
        if parts is None:
            count = counts([name]).get(name)
            if count is None:
                fail(f"Topic '{name}' does not exist.", ExitCode.NOT_FOUND)
            parts = list(range(count))
        chosen.extend((name, p) for p in parts)
    return sorted(set(chosen))


def _existing(counts: Any, partitions: list[TP]) -> list[TP]:
    """``partitions``, each checked to exist on the broker."""
    known = counts(sorted({t for t, _ in partitions}))
    for t, p in partitions:
        if t not in known:
            fail(f"Topic '{t}' does not exist.", ExitCode.NOT_FOUND)
        if not 0 <= p < known[t]:
            fail(f"Partition {t}-{p} does not exist ({t} has {known[t]}).", ExitCode.NOT_FOUND)
    return partitions


def _offsets_at(servers: str, partitions: list[TP], ms: int) -> dict[TP, int | None]:
    """The first offset at or after ``ms`` (ListOffsets by timestamp); None where none is."""
    if not partitions:
        return {}
    consumer = Consumer(base_config(servers, "kafkacoord-reset", **{"group.id": "kc-reset"}))
    try:
        found = consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in partitions], 30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}


def _print_outcome(
    outcome: Outcome, *, execute: bool, export: bool, output: OutputFormat, with_group: bool
) -> None:
    if export:
        typer.echo(format_reset_plans(outcome.plans, with_group=with_group), nl=False)
    elif output is OutputFormat.json:
        print_json(reset_document(outcome.plans, outcome.errors, executed=execute))
    elif any(outcome.plans.values()):
        print_rows([
            ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
            *((g, t, str(p), str(o)) for g, plan in sorted(outcome.plans.items())
              for (t, p), o in sorted(plan.items())),
        ])  # fmt: skip


def reset_document(
    plans: Mapping[str, Mapping[TP, int]],
    errors: Mapping[str, Mapping[TP, ErrorCode]],
    *,
    executed: bool,
) -> dict[str, Any]:
    """``groups reset-offsets --output json`` (schemas/groups-reset-offsets.json)."""

    def error(group: str, tp: TP) -> str | None:
        code = errors.get(group, {}).get(tp)
        return None if code is None else code.name

    return {
        "executed": executed,
        "groups": [
            {"group_id": group, "partitions": [
                {"topic": t, "partition": p, "new_offset": o, "error": error(group, (t, p))}
                for (t, p), o in sorted(plan.items())
            ]}
            for group, plan in sorted(plans.items())
        ],
    }  # fmt: skip


def _exit_on_failures(outcome: Outcome) -> None:
    for why, _ in outcome.skipped.values():
        typer.echo(f"Error: {why}", err=True)
    if outcome.errors:
        names = {e.name for failed in outcome.errors.values() for e in failed.values()}
        count = sum(len(failed) for failed in outcome.errors.values())
        hint = (
            " (the group must be empty: stop its members first)"
            if names & {"UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS"}
            else ""
        )
        fail(f"reset failed for {count} partitions: {', '.join(sorted(names))}{hint}")
    if outcome.skipped:
        raise typer.Exit(max(code for _, code in outcome.skipped.values()))
    if not any(outcome.plans.values()):
        fail("no partitions to reset")
