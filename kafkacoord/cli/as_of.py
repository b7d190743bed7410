"""``--as-of``: the metadata image at an instant, from the log, else from a warehouse."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkacoord.client.admin.controller_admin import ControllerAdmin
from kafkacoord.client.instants import parse_instant
from kafkacoord.client.metadata_history import HistoryUnavailableError, metadata_as_of
from kafkacoord.codecs import SPECS, RecordType, decode_key
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.runtime.shard import Record

from .common import ExitCode, fail

AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="The state at that instant, read from the metadata log: ISO-8601 "
        "(2026-11-28T03:12:00Z) or relative (-15m, -2h).",
    ),
]
WarehouseOption = Annotated[
    Path | None,
    typer.Option(
        "--warehouse",
        help="A views warehouse (kafkacoord views run) for instants older than the log's "
        "history window.",
    ),
]


def parse_as_of(text: str, now_ms: int, option: str = "--as-of") -> int:
    try:
        return parse_instant(text, now_ms)
    except ValueError as exc:
        raise fail(f"{option}: {exc}", ExitCode.USAGE) from None


def metadata_image(
    admin: ControllerAdmin, as_of: str | None, warehouse: Path | None = None
) -> MetadataImage:
    """Today's image, or the one at ``--as-of``."""
    if as_of is None:
        return admin.metadata()
    now_ms = int(time.time() * 1000)
    instant = parse_as_of(as_of, now_ms)
    try:
        return metadata_as_of(admin.bootstrap, admin.topics, instant, now_ms)
    except HistoryUnavailableError as exc:
        if warehouse is None:
            raise fail(str(exc), ExitCode.NOT_FOUND) from None
    return warehouse_image(warehouse, instant)


def warehouse_image(warehouse: Path, instant_ms: int) -> MetadataImage:
    """The image from the warehouse's ``metadata_history`` (every record, by log time)."""
    try:
        from kafkacoord.spark.avro import struct_column
        from kafkacoord.spark.warehouse.history import metadata_history
    except ImportError as exc:  # the spark extra is not installed
        raise fail(f"--warehouse needs kafkacoord[spark]: {exc}", ExitCode.USAGE) from None
    if not warehouse.is_dir():
        raise fail(f"--warehouse: {warehouse} is not a directory", ExitCode.USAGE)
    image = MetadataImage()
    for row in metadata_history(warehouse, until_ms=instant_ms).to_pylist():
        image.replay(record_of_row(row, struct_column))
    return image


def record_of_row(row: dict[str, Any], struct_column: Any) -> Record:
    rtype = RecordType[row["record_type"]]
    key = decode_key(row["key"])
    if row["tombstone"]:
        return Record(key, None)
    return Record(key, SPECS[rtype].value_cls.from_avro(row[struct_column(rtype)]))
