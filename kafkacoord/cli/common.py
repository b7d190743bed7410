"""What every command shares: options, settings, errors and the admin session."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from kafkacoord.cli.reassign_files import (
    ReassignmentFileError,
)
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.controller.placement import AdminOperationError
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.server.settings import Settings, load_settings
from kafkacoord.storage.kafka_security import KAFKACOORD, properties_file

BOOTSTRAP_FILE = "bootstrap"

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML config file (also $KAFKACOORD_CONFIG).")
]
BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server", "--bootstrap", "-b",
        help="Kafka bootstrap servers (also $KAFKACOORD_BOOTSTRAP); defaults to the "
        "embedded broker of a local daemon.",
    ),
]  # fmt: skip
KafkaConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kafka-config", "--command-config",
        help="Kafka client properties file: security.protocol, ssl.*, sasl.* (also "
        "$KAFKACOORD_KAFKA_CONFIG).",
    ),
]  # fmt: skip
TopicOption = Annotated[str, typer.Option("--topic", "-t", help="Topic name.")]


def resolve_settings(
    config: Path | None, bootstrap: str | None, kafka_config: Path | None = None
) -> Settings:
    try:
        settings = load_settings(config, bootstrap=bootstrap, kafka_config=kafka_config)
    except (ValidationError, FileNotFoundError) as exc:
        fail(f"invalid configuration: {exc}", 2)
    if settings.bootstrap is None:
        written = settings.data_dir / BOOTSTRAP_FILE
        if not written.is_file():
            fail("no broker: pass --bootstrap-server, set KAFKACOORD_BOOTSTRAP, or start "
                 "a local daemon (./dev.sh daemon)", 2)  # fmt: skip
        if kafka_config is None and settings.kafka_config is None:
            # A secured embedded Kafka: its credentials for kafkacoord lie beside it.
            local = settings.data_dir / "kafka" / properties_file(KAFKACOORD)
            kafka_config = local if local.is_file() else None
        settings = load_settings(
            config, bootstrap=written.read_text().strip(), kafka_config=kafka_config
        )
    return settings


def fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def admin_session(
    config: Path | None, bootstrap: str | None, kafka_config: Path | None = None
) -> Iterator[ControllerAdmin]:
    settings = resolve_settings(config, bootstrap, kafka_config)
    try:
        with ControllerAdmin(
            settings.kafka_bootstrap(settings.bootstrap or ""), settings.topics,
            tls=settings.client_tls(),
        ) as admin:  # fmt: skip
            yield admin
    except RequestError as exc:
        fail(exc.message or exc.code.name if exc.code is not ErrorCode.NONE else str(exc))
    except (TimeoutError, ReassignmentFileError, AdminOperationError) as exc:
        fail(str(exc))
    except ValidationError as exc:  # a value the request cannot carry (a bad topic name...)
        fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()), 2)


def parse_configs(pairs: list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--config expects key=value, got {pair!r}", 2)
        configs[key] = value
    return configs


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' ``--replica-assignment 1:2,2:3``: partitions by comma, replicas by colon."""
    try:
        return [[int(r) for r in part.split(":")] for part in text.split(",")]
    except ValueError:
        fail(f"--replica-assignment expects e.g. 1:2:3,2:3:1, got {text!r}", 2)
        raise
