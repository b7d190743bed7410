"""``--output table|json``: how a command prints its answer (docs/cli-json.md)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any

import typer


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


OutputOption = Annotated[
    OutputFormat,
    typer.Option(
        "--output", "-o", help="table (the Kafka tools' text) or json (docs/cli-json.md)."
    ),
]


def print_json(document: Any) -> None:
    """One JSON document on stdout, keys in a stable order."""
    typer.echo(json.dumps(document, indent=2, sort_keys=True))
