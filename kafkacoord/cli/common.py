"""What every command shares: options, settings, errors and the admin session."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from kafkacoord.cli.cluster_settings import find_settings
from kafkacoord.cli.completion import complete_topics
from kafkacoord.cli.reassign_files import (
    ReassignmentFileError,
)
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.controller.placement import AdminOperationError
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.server.settings import Settings
from kafkacoord.storage.errors import StorageError

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
TopicOption = Annotated[
    str, typer.Option("--topic", "-t", help="Topic name.", autocompletion=complete_topics)
]


class ExitCode(IntEnum):
    """What a command's exit status means (docs/operations.md#exit-codes)."""

    OK = 0
    FAILED = 1  # the request ran but did not (fully) succeed
    USAGE = 2  # bad arguments or configuration
    NOT_FOUND = 3  # no such topic, partition, group or node
    REFUSED = 4  # not authorized, or an invalid request
    UNREACHABLE = 5  # no broker, no daemon answering, or a timeout


_NOT_FOUND = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.GROUP_ID_NOT_FOUND,
})  # fmt: skip
_UNREACHABLE = frozenset({
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_CONTROLLER,
})  # fmt: skip
_REFUSED = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.INVALID_GROUP_ID, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_PARTITIONS,
    ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST, ErrorCode.POLICY_VIOLATION,
    ErrorCode.REASSIGNMENT_IN_PROGRESS, ErrorCode.NON_EMPTY_GROUP, ErrorCode.INELIGIBLE_REPLICA,
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.UNSUPPORTED_VERSION,
})  # fmt: skip


def exit_code(error: ErrorCode) -> ExitCode:
    """The exit status for a request that failed with ``error``."""
    if error in _NOT_FOUND:
        return ExitCode.NOT_FOUND
    if error in _REFUSED:
        return ExitCode.REFUSED
    if error in _UNREACHABLE:
        return ExitCode.UNREACHABLE
    return ExitCode.FAILED


def resolve_settings(
    config: Path | None, bootstrap: str | None, kafka_config: Path | None = None
) -> Settings:
    try:
        settings = find_settings(config, bootstrap, kafka_config)
    except (ValidationError, FileNotFoundError) as exc:
        raise fail(f"invalid configuration: {exc}", ExitCode.USAGE) from exc
    if settings is None:
        raise fail("no broker: pass --bootstrap-server, set KAFKACOORD_BOOTSTRAP, or start "
                   "a local daemon (./dev.sh daemon)", ExitCode.UNREACHABLE)  # fmt: skip
    return settings


def fail(message: str, code: int = ExitCode.FAILED) -> typer.Exit:
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
            tls=settings.client_tls(), timeout_s=settings.request_timeout_ms / 1000,
        ) as admin:  # fmt: skip
            yield admin
    except RequestError as exc:
        fail(exc.message or exc.code.name if exc.code is not ErrorCode.NONE else str(exc),
             exit_code(exc.code))  # fmt: skip
    except (TimeoutError, StorageError) as exc:
        fail(str(exc), ExitCode.UNREACHABLE)
    except ReassignmentFileError as exc:
        fail(str(exc), ExitCode.USAGE)
    except AdminOperationError as exc:
        fail(str(exc), ExitCode.REFUSED)
    except ValidationError as exc:  # a value the request cannot carry (a bad topic name...)
        fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()),
             ExitCode.USAGE)  # fmt: skip


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
