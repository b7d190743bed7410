"""``kafkacoord status``: the cluster on one screen (or as JSON for scripts)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Annotated, Any

import typer

from kafkacoord.cli.common import (
    BootstrapOption,
    ConfigOption,
    ExitCode,
    KafkaConfigOption,
    fail,
    resolve_settings,
)
from kafkacoord.cli.output import OutputFormat, OutputOption
from kafkacoord.cli.render import table
from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import read_metadata
from kafkacoord.client.admin.summary import TP, cluster_summary, group_lag
from kafkacoord.client.errors import RequestError
from kafkacoord.server.settings import Settings
from kafkacoord.storage.errors import StorageError
from kafkacoord.storage.watermarks import log_end_offsets

ROWS = 10
"""Rows per table in the text output; --json lists everything."""


def _read_groups(
    settings: Settings, timeout_s: float
) -> tuple[dict[str, str] | None, dict[str, int | None], str | None]:
    """Groups and their states, their total lag, and what went wrong, if anything."""
    servers = settings.kafka_bootstrap(settings.bootstrap or "")
    try:
        with GroupAdmin(
            servers, topic_prefix=settings.topic_prefix,
            offsets_partitions=settings.offsets_partitions,
            tls=settings.client_tls(), timeout_s=timeout_s,
        ) as admin:  # fmt: skip
            states = {g.group_id: g.state for g in admin.list_groups()}
            committed = {
                group: {tp: p.offset for tp, p in admin.committed(group).items()}
                for group in states
            }
    except (RequestError, TimeoutError) as exc:
        return None, {}, f"groups unavailable: {exc}"
    partitions: set[TP] = {tp for offsets in committed.values() for tp in offsets}
    try:
        ends = log_end_offsets(servers, partitions, timeout_s=timeout_s) if partitions else {}
    except StorageError as exc:
        return states, dict.fromkeys(states), f"lag unavailable: {exc}"
    return states, {g: group_lag(offsets, ends) for g, offsets in committed.items()}, None


def status(
    as_json: Annotated[bool, typer.Option("--json", help="The same as --output json.")] = False,
    output: OutputOption = OutputFormat.table,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each read.")] = 15.0,
    config: ConfigOption = None,
    bootstrap: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Controller, nodes, group shards, partition health and group lag."""
    settings = resolve_settings(config, bootstrap, kafka_config)
    topics = settings.topics
    try:
        image = read_metadata(
            settings.kafka_bootstrap(settings.bootstrap or ""), topics.metadata, timeout
        )
    except (TimeoutError, StorageError) as exc:
        fail(str(exc), ExitCode.UNREACHABLE)
    states, lags, error = _read_groups(settings, timeout)
    summary = cluster_summary(image, topics.offsets, states, lags, groups_error=error)
    if as_json or output is OutputFormat.json:
        typer.echo(json.dumps(summary, indent=2))
        return
    for line in render(summary):
        typer.echo(line)


def _ids(values: list[int]) -> str:
    return ",".join(map(str, values)) or "-"


def _more(lines: list[str], shown: int, total: int, what: str) -> None:
    if total > shown:
        lines.append(f"  ... {total - shown} more {what} (--json lists all)")


Rows = list[tuple[str, ...]]


def render(summary: dict[str, Any]) -> list[str]:
    return [
        *_controller(summary["controller"]),
        *_nodes(summary["nodes"]),
        *_shards(summary["offsets_shards"]),
        *_partitions(summary["partitions"]),
        *_groups_lines(summary["groups"]),
    ]


def _indented(rows: Rows) -> list[str]:
    return ["  " + line for line in table(rows)]


def _controller(controller: dict[str, Any] | None) -> list[str]:
    if controller is None:
        return ["Controller: none elected yet"]
    since = datetime.fromtimestamp(controller["activated_ms"] / 1000, tz=timezone.utc)
    return [f"Controller: node {controller['node_id']}, epoch {controller['epoch']} "
            f"(since {since:%Y-%m-%d %H:%M:%S} UTC)"]  # fmt: skip


def _nodes(nodes: list[dict[str, Any]]) -> list[str]:
    counts = {s: sum(n["state"] == s for n in nodes) for s in ("live", "fenced", "shutting_down")}
    lines = [f"\nNodes: {len(nodes)} ({counts['live']} live, {counts['fenced']} fenced, "
             f"{counts['shutting_down']} shutting down)"]  # fmt: skip
    rows: Rows = [("ID", "ROLES", "STATE", "RACK", "EPOCH")]
    rows += [(str(n["id"]), ",".join(n["roles"]) or "-", n["state"], n["rack"] or "-",
              str(n["epoch"])) for n in nodes[:ROWS]]  # fmt: skip
    lines += _indented(rows)
    _more(lines, ROWS, len(nodes), "nodes")
    return lines


def _shards(shards: list[dict[str, Any]]) -> list[str]:
    leaders: dict[int, int] = {}
    for s in shards:
        leaders[s["leader"]] = leaders.get(s["leader"], 0) + 1
    spread = ", ".join(f"node {n}: {c}" if n >= 0 else f"none: {c}"
                       for n, c in sorted(leaders.items()))  # fmt: skip
    lines = [f"\nGroup shards: {len(shards)} (leaders {spread or '-'})"]
    # Shards without a leader or with a short ISR first: they are what needs attention.
    ordered = sorted(shards, key=lambda s: (s["leader"] >= 0 and s["isr"] == s["replicas"],
                                            s["partition"]))  # fmt: skip
    rows: Rows = [("PARTITION", "LEADER", "REPLICAS", "ISR")]
    rows += [(str(s["partition"]), str(s["leader"]) if s["leader"] >= 0 else "none",
              _ids(s["replicas"]), _ids(s["isr"])) for s in ordered[:ROWS]]  # fmt: skip
    lines += _indented(rows)
    _more(lines, ROWS, len(shards), "shards")
    return lines


def _partitions(parts: dict[str, Any]) -> list[str]:
    under, offline = parts["under_replicated"], parts["offline"]
    lines = [f"\nPartitions: {parts['total']} total, {under['count']} under-replicated, "
             f"{offline['count']} offline"]  # fmt: skip
    for label, problem in (("under-replicated", under), ("offline", offline)):
        for p in problem["first"]:
            leader = p["leader"] if p["leader"] >= 0 else "none"
            line = (f"  {label}: {p['topic']}-{p['partition']}  leader {leader}  "
                    f"replicas {_ids(p['replicas'])}  isr {_ids(p['isr'])}")  # fmt: skip
            if p.get("elr"):
                line += f"  elr {_ids(p['elr'])}"
            if p.get("last_known_elr"):
                line += f"  last-known-elr {_ids(p['last_known_elr'])}"
            lines.append(line)
        _more(lines, len(problem["first"]), problem["count"], f"{label} partitions")
    return lines


def _groups_lines(groups: dict[str, Any]) -> list[str]:
    if groups["count"] is None:
        return [f"\nGroups: unknown ({groups['error']})"]
    by_state = ", ".join(f"{state}: {n}" for state, n in groups["by_state"].items())
    lines = [f"\nGroups: {groups['count']}{f' ({by_state})' if by_state else ''}, "
             f"total lag {groups['total_lag']}"]  # fmt: skip
    if groups["error"]:
        lines.append(f"  {groups['error']}")
    listed = sorted(groups["groups"], key=lambda g: (-(g["lag"] or 0), g["group"]))
    if listed:
        rows: Rows = [("GROUP", "STATE", "LAG")]
        rows += [(g["group"], g["state"], "-" if g["lag"] is None else str(g["lag"]))
                 for g in listed[:ROWS]]  # fmt: skip
        lines += _indented(rows)
        _more(lines, ROWS, len(listed), "groups")
    return lines


def register(app: typer.Typer) -> None:
    app.command("status")(status)
