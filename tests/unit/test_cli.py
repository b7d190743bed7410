"""The command line: version, help, and invalid configuration exits with code 2."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kafkacoord import BUILD, __version__
from kafkacoord.cli.main import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kafkacoord {__version__} (hot path: {BUILD.value})"


def test_daemon_help_lists_its_options() -> None:
    result = runner.invoke(app, ["daemon", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--bootstrap", "--node-id", "--data-dir", "--strict"):
        assert option in result.output


def test_invalid_configuration_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("offsets_partitions = -1\n")
    result = runner.invoke(app, ["daemon", "--config", str(config)])
    assert result.exit_code == 2
    assert "invalid configuration" in result.output and "offsets_partitions" in result.output


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["daemon", "--config", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert "config file not found" in result.output


def test_a_value_no_request_can_carry_exits_2_naming_the_field() -> None:
    # Refused as the request is built, before anything is sent (the bootstrap is unused).
    result = runner.invoke(app, ["topics", "create", "--topic", "bad name", "--partitions", "1",
                                 "--bootstrap", "127.0.0.1:1"])  # fmt: skip
    assert result.exit_code == 2
    assert "name:" in result.output and "Traceback" not in result.output
