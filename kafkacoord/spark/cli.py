"""``views``: run the Spark view job, and show views from the warehouse without a JVM.

Mounted as ``kafkacoord views``; also ``python -m kafkacoord.spark.job`` (spark-submit).
"""

from __future__ import annotations

import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

views_app = typer.Typer(
    name="views",
    help="Queryable Spark views of groups, offsets, partitions and leadership.",
    no_args_is_help=True,
    add_completion=False,
)

WarehouseOption = Annotated[
    Path,
    typer.Option(
        envvar="KAFKACOORD_WAREHOUSE", help="Warehouse directory (views and checkpoints)."
    ),
]
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}


class Format(str, Enum):
    table = "table"
    json = "json"


class SourceName(str, Enum):
    python = "python"
    connector = "connector"


def trigger_interval(text: str) -> str:
    """``1s``, ``500ms``, ``2m`` as Spark's processing-time interval."""
    match = _DURATION.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a duration like 1s, 500ms or 2m")
    millis = int(float(match[1]) * _UNIT_MS[match[2] or "s"])
    return f"{millis} milliseconds"


@views_app.command()
def run(
    bootstrap: Annotated[
        str, typer.Option(envvar="KAFKACOORD_BOOTSTRAP", help="Kafka bootstrap servers.")
    ],
    warehouse: WarehouseOption = Path("warehouse"),
    prefix: Annotated[str, typer.Option(help="Internal topic prefix.")] = "__kc_",
    trigger: Annotated[str, typer.Option(help="Micro-batch interval, e.g. 1s or 500ms.")] = "1s",
    available_now: Annotated[
        bool, typer.Option("--available-now", help="Process what is there now, then exit.")
    ] = False,
    master: Annotated[
        str | None, typer.Option(help="Spark master (default: spark-submit's, else local[*]).")
    ] = None,
    max_records_per_batch: Annotated[
        int, typer.Option(min=1, help="At most this many records per micro-batch.")
    ] = 200_000,
    state_partitions: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="State store partitions, fixed once a checkpoint exists (default: the "
            "session's cores; set more if the cluster will grow).",
        ),
    ] = None,
    retention_minutes: Annotated[
        int, typer.Option(min=1, help="offsets.retention.minutes, for expiry in the views.")
    ] = 10080,
    lag_interval: Annotated[
        float, typer.Option(min=0.1, help="Seconds between log-end-offset samples (lag).")
    ] = 5.0,
    allowed_lag: Annotated[
        int,
        typer.Option(
            min=0, help="lag_status: a lag at most this counts as none (Burrow's allowed-lag)."
        ),
    ] = 0,
    lag_history_resolution: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="Seconds per lag_history bucket (kept as long as offsets are retained).",
        ),
    ] = 60.0,
    checkpoint: Annotated[
        str | None, typer.Option(help="Checkpoint location (default: <warehouse>/_checkpoints).")
    ] = None,
    kafka_config: Annotated[
        Path | None,
        typer.Option(
            "--kafka-config",
            "--command-config",
            envvar="KAFKACOORD_KAFKA_CONFIG",
            help="Kafka client properties file (security.protocol, ssl.*, sasl.*), for both "
            "sources and the lag sampler.",
        ),
    ] = None,
    source: Annotated[
        SourceName,
        typer.Option(
            help="python: the kafkacoord data source; connector: Spark's Kafka source and "
            "spark-avro (jars resolved from Maven Central). Same views; one per checkpoint."
        ),
    ] = SourceName.python,
) -> None:
    """Fold the internal topics into the warehouse views, continuously or once."""
    from .fold_layout import FoldLayoutError
    from .run import RunConfig, Source
    from .run import run as run_job
    from .session import spark_session

    jars: list[str] = []
    if source is SourceName.connector:
        from .connector import ConnectorJarsError, connector_jars

        try:
            jars = connector_jars()
        except ConnectorJarsError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc

    from kafkacoord.storage.kafka_config import Bootstrap, KafkaClientConfig, KafkaConfigError

    try:
        security = None if kafka_config is None else KafkaClientConfig.load(kafka_config)
    except KafkaConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    config = RunConfig(
        # The driver's own clients (the lag sampler, the broker probe) read it here.
        bootstrap=Bootstrap(bootstrap, security),
        kafka={} if security is None else security.librdkafka(),
        connector_kafka={} if security is None else security.java(),
        warehouse=warehouse,
        prefix=prefix,
        trigger=trigger_interval(trigger),
        available_now=available_now,
        max_records_per_batch=max_records_per_batch,
        retention_ms=retention_minutes * 60_000,
        lag_interval_s=lag_interval,
        allowed_lag=allowed_lag,
        lag_history_resolution_s=lag_history_resolution,
        checkpoint=checkpoint,
        source=Source(source.value),
    )
    spark = spark_session(master, state_partitions=state_partitions, jars=jars)
    try:
        run_job(spark, config)
    except KeyboardInterrupt:
        typer.echo("stopped", err=True)
    except FoldLayoutError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        spark.stop()


@views_app.command()
def show(
    name: Annotated[str, typer.Argument(help="View name; see `views list`.")],
    where: Annotated[
        str | None, typer.Option(help='Row filter (pandas query), e.g. "lag > 100".')
    ] = None,
    output: Annotated[
        Format, typer.Option("--output", "-o", "--format", help="table or json.")
    ] = Format.table,
    warehouse: WarehouseOption = Path("warehouse"),
    limit: Annotated[int | None, typer.Option(min=1, help="Show at most this many rows.")] = None,
) -> None:
    """Print a view's current rows (reads the Parquet directly; no Spark)."""
    import pandas as pd  # type: ignore[import-untyped]

    from .views import VIEWS, read_view

    if name not in VIEWS:
        typer.echo(f"error: no view named {name!r}; views: {', '.join(VIEWS)}", err=True)
        raise typer.Exit(2)
    frame = read_view(warehouse, name).to_pandas()
    if where:
        try:
            frame = frame.query(where)
        except Exception as exc:  # pandas raises many types for a bad expression
            typer.echo(f"error: bad --where expression {where!r}: {exc}", err=True)
            raise typer.Exit(2) from exc
    if limit is not None:
        frame = frame.head(limit)
    if output is Format.json:
        typer.echo(frame.to_json(orient="records", date_format="iso", default_handler=str))
        return
    with pd.option_context("display.width", None, "display.max_columns", None,
                           "display.max_colwidth", 60):  # fmt: skip
        typer.echo(frame.to_string(index=False) if len(frame) else "(no rows)")


@views_app.command("list")
def list_views(warehouse: WarehouseOption = Path("warehouse")) -> None:
    """The views and how many rows each has now."""
    from .views import VIEWS, Snapshot, read_view
    from .warehouse import Warehouse

    snapshot = Snapshot.of(Warehouse(warehouse))
    for name in VIEWS:
        rows = read_view(warehouse, name, snapshot=snapshot).num_rows
        typer.echo(f"{name:20} {rows}")


def main() -> None:
    sys.exit(views_app())
