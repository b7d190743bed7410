"""The fold's state layout, checked against an existing checkpoint.

The streaming fold keeps one struct column per warehouse table in Spark's state store;
a kafkacoord that adds a table (the KIP-848 consumer group tables, for one) changes that
state's schema, and Spark refuses the old checkpoint with a bare schema dump. The
connector source's fence was once a stateful stage of its own, ahead of the fold, so
its older checkpoints hold state for an operator the job no longer has. The layout
is written beside the checkpoint's own files, so a job started on an older checkpoint
stops at once with what to do instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final
from urllib.parse import urlparse

from .tables import RECORD_TABLES

__all__ = ["FoldLayoutError", "check_fold_layout", "fold_layout", "local_path"]

LAYOUT_FILE: Final = "kafkacoord-fold-layout"
# Marks the connector's checkpoints since its fence keeps no state.
CONNECTOR_FENCE: Final = "connector-fence-in-read"


class FoldLayoutError(RuntimeError):
    """The checkpoint was written for other tables than this kafkacoord folds."""


def fold_layout(*, connector: bool = False) -> str:
    tables = ",".join(RECORD_TABLES.values())
    return f"{tables};{CONNECTOR_FENCE}" if connector else tables


def local_path(location: str) -> Path | None:
    """The local directory of a checkpoint location, or ``None`` for a remote one."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location)
    return None  # a remote checkpoint (HDFS, S3): Spark's own check stands


def check_fold_layout(checkpoint: str, warehouse: Path, *, connector: bool = False) -> None:
    """Raise :class:`FoldLayoutError` for a checkpoint of another layout; mark a new one."""
    path = local_path(checkpoint)
    if path is None:
        return
    marker = path / LAYOUT_FILE
    started = (path / "offsets").exists() or (path / "commits").exists()
    layout = fold_layout(connector=connector)
    if started:
        found = marker.read_text("utf-8").strip() if marker.exists() else "an older kafkacoord's"
        if found != layout:
            raise FoldLayoutError(
                f"the view job's checkpoint {path} holds the layout {found}; this kafkacoord "
                f"needs {layout}. The views are rebuilt from the internal topics: delete "
                f"the checkpoint and the warehouse ({warehouse}) and start the job again "
                "(lag_history keeps only what the topics still hold)."
            )
        return
    path.mkdir(parents=True, exist_ok=True)
    marker.write_text(layout + "\n", "utf-8")
