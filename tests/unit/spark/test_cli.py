"""``views show`` and ``views list`` read the warehouse with no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkacoord.spark.assignment import encode_assignment
from kafkacoord.spark.cli import trigger_interval, views_app

from .warehouse_rows import commit, group, member, put, warehouse

runner = CliRunner()


@pytest.fixture
def wh_path(tmp_path: Path) -> Path:
    wh = warehouse(tmp_path)
    put(wh, "group_metadata", ("group",), [
        group("g1", [member("m1", encode_assignment({"orders": [0]}))]),
        group("g2", []),
    ])  # fmt: skip
    put(wh, "offset_commits", ("group", "topic", "partition"),
        [commit("g1", "orders", 0, 7), commit("g1", "orders", 1, 9)])  # fmt: skip
    return wh.root


def test_show_table(wh_path: Path) -> None:
    result = runner.invoke(views_app, ["show", "groups", "--warehouse", str(wh_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["group", "state", "protocol_type"]
    assert lines[1].split()[:2] == ["g1", "Stable"] and lines[2].split()[:2] == ["g2", "Empty"]


def test_show_json_with_where_and_limit(wh_path: Path) -> None:
    args = ["show", "group_offsets", "--warehouse", str(wh_path), "--format", "json"]
    result = runner.invoke(views_app, [*args, "--where", "current_offset > 8"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert [(r["group"], r["partition"], r["current_offset"]) for r in got] == [("g1", 1, 9)]
    limited = json.loads(runner.invoke(views_app, [*args, "--limit", "1"]).output)
    assert len(limited) == 1 and limited[0]["consumer_id"] == "m1"
    # --output (-o) is the same option as --format, as on the other commands.
    same = runner.invoke(views_app, ["show", "group_offsets", "--warehouse", str(wh_path),
                                     "-o", "json"])  # fmt: skip
    assert same.exit_code == 0, same.output
    assert json.loads(same.output) == json.loads(runner.invoke(views_app, args).output)


def test_show_errors(wh_path: Path) -> None:
    unknown = runner.invoke(views_app, ["show", "nope", "--warehouse", str(wh_path)])
    assert unknown.exit_code == 2 and "group_offsets" in unknown.output
    bad = runner.invoke(views_app, ["show", "groups", "--warehouse", str(wh_path),
                                    "--where", "group ==="])  # fmt: skip
    assert bad.exit_code == 2 and "bad --where" in bad.output


def test_empty_warehouse_and_list(tmp_path: Path, wh_path: Path) -> None:
    empty = runner.invoke(views_app, ["show", "partitions", "--warehouse", str(tmp_path / "x")])
    assert empty.exit_code == 0 and "(no rows)" in empty.output
    listed = runner.invoke(views_app, ["list", "--warehouse", str(wh_path)])
    counts = dict(line.split() for line in listed.output.splitlines())
    assert counts["groups"] == "2" and counts["group_offsets"] == "2"
    assert counts["partitions"] == "0"


def test_trigger_intervals() -> None:
    assert trigger_interval("1s") == "1000 milliseconds"
    assert trigger_interval("500ms") == "500 milliseconds"
    assert trigger_interval("2m") == "120000 milliseconds"
    assert trigger_interval("3") == "3000 milliseconds"


def test_allowed_lag_must_not_be_negative() -> None:
    result = runner.invoke(views_app, ["run", "--bootstrap", "x:1", "--allowed-lag", "-1"])
    assert result.exit_code == 2 and "allowed-lag" in result.output
