"""``kafkacoord console``: what the web console's settings need."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kafkacoord.cli.common import fail
from kafkacoord.console.auth import hash_password as argon2_hash

console_app = typer.Typer(help="The web console.", no_args_is_help=True)


@console_app.command("hash-password")
def hash_password(
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin", help="Read the password from standard input, not a prompt."
        ),
    ] = False,
) -> None:
    """Print an argon2 hash of a password, for a console_users entry."""
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        fail("the password is empty", 2)
    typer.echo(argon2_hash(password))
