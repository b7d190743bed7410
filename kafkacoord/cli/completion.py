"""Shell completion of topic and group names, asked of the running cluster.

The shell waits on these while the user waits on the shell: each lookup is bounded by
:data:`TIMEOUT_S` and answers nothing, quietly, when no broker or daemon answers in time.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import typer

from kafkacoord.cli.cluster_settings import find_settings
from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import read_metadata
from kafkacoord.server.settings import Settings
from kafkacoord.threads import spawn

TIMEOUT_S = 1.5
_LIBRDKAFKA = logging.getLogger("librdkafka")  # where the clients' librdkafka logs go


def complete_topics(ctx: typer.Context, incomplete: str) -> list[str]:
    """Topic names from the metadata log (what ``topics list`` shows) that start with
    ``incomplete``."""

    def topics(settings: Settings) -> list[str]:
        bootstrap = settings.kafka_bootstrap(settings.bootstrap or "")
        return sorted(read_metadata(bootstrap, settings.topics.metadata, TIMEOUT_S).topics)

    return _matching(_lookup(ctx, topics), incomplete)


def complete_groups(ctx: typer.Context, incomplete: str) -> list[str]:
    """Group ids the daemons' shards list that start with ``incomplete``."""

    def groups(settings: Settings) -> list[str]:
        with GroupAdmin(
            settings.kafka_bootstrap(settings.bootstrap or ""),
            topic_prefix=settings.topic_prefix, offsets_partitions=settings.offsets_partitions,
            tls=settings.client_tls(), timeout_s=TIMEOUT_S,
        ) as admin:  # fmt: skip
            return [group.group_id for group in admin.list_groups(timeout_s=TIMEOUT_S)]

    return _matching(_lookup(ctx, groups), incomplete)


def _matching(names: list[str], incomplete: str) -> list[str]:
    return [name for name in names if name.startswith(incomplete)]


def _lookup(ctx: typer.Context, fetch: Callable[[Settings], list[str]]) -> list[str]:
    """``fetch`` against the cluster that the options typed so far (or the environment
    and config file) name, given :data:`TIMEOUT_S` in all; nothing on any failure, since
    a traceback or an error line would land in the middle of the user's command line."""
    params = ctx.params  # the options typed so far: click parsed them for the completion
    found: list[str] = []

    def look_up() -> None:
        try:
            settings = find_settings(
                _path(params.get("config")), params.get("bootstrap"),
                _path(params.get("kafka_config")),
            )  # fmt: skip
            if settings is not None:
                found.extend(fetch(settings))
        except Exception:  # any failure: offer nothing rather than a traceback
            found.clear()

    # The clients' own timeouts do not add up to one bound (a broker that accepts and
    # never answers costs a probe, then a read): the shell waits for this thread alone.
    with _silenced():
        worker = spawn("completion", look_up)
        worker.join(TIMEOUT_S)
    if worker.is_alive():
        # Given up on: its clients may still log their failures until the process ends,
        # right after the answer.
        _LIBRDKAFKA.disabled = True
        return []
    return found


def _path(value: object) -> Path | None:
    return None if value is None else Path(str(value))


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """Keep client log lines (librdkafka's connection failures, through Python's
    last-resort handler) off the terminal and out of the completion answer."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        yield
