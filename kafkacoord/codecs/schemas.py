"""Load the packaged ``.avsc`` files, named ``<name>.v<version>.avsc``."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

import fastavro

_FILE = re.compile(r"^(?P<name>[a-z_]+)\.v(?P<version>\d+)\.avsc$")


@cache
def _catalogue() -> dict[str, dict[int, str]]:
    found: dict[str, dict[int, str]] = {}
    for entry in resources.files(__package__).joinpath("schemas").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.setdefault(match["name"], {})[int(match["version"])] = entry.read_text("utf-8")
    return found


def versions(name: str) -> list[int]:
    """All versions of a schema, ascending."""
    try:
        return sorted(_catalogue()[name])
    except KeyError:
        raise KeyError(f"no schema named {name!r}") from None


@cache
def parsed(name: str, version: int) -> Any:
    """The parsed (fastavro) schema; each call site shares one parsed object."""
    text = _catalogue()[name][version]
    # Parse each schema in its own named-type space so versions never clash.
    return fastavro.parse_schema(json.loads(text), named_schemas={})


def raw(name: str, version: int) -> dict[str, Any]:
    """The schema as JSON, as shipped (for docs and tooling)."""
    result: dict[str, Any] = json.loads(_catalogue()[name][version])
    return result
