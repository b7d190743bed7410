"""``kafkacoord console hash-password``: a hash the console's users accept."""

from __future__ import annotations

from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.console.auth import Users


def test_hash_password_prompts_twice_and_prints_a_hash_that_verifies() -> None:
    result = CliRunner().invoke(app, ["console", "hash-password"], input="wonderland\nwonderland\n")
    assert result.exit_code == 0, result.output
    digest = result.output.strip().splitlines()[-1]
    assert digest.startswith("$argon2id$")
    assert Users({"alice": digest}).verify("alice", "wonderland")
    assert not Users({"alice": digest}).verify("alice", "wonderlan")


def test_hash_password_reads_stdin_and_refuses_an_empty_password() -> None:
    runner = CliRunner()
    piped = runner.invoke(app, ["console", "hash-password", "--password-stdin"], input="s3cret\n")
    assert piped.exit_code == 0
    assert Users({"bob": piped.output.strip()}).verify("bob", "s3cret")
    empty = runner.invoke(app, ["console", "hash-password", "--password-stdin"], input="\n")
    assert empty.exit_code == 2
    assert "the password is empty" in empty.output
