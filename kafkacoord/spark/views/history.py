"""``metadata_history``: every metadata record in log order, with its resolved cause.

For the metadata in effect at an instant, or a table as of a Delta version,
see :mod:`kafkacoord.spark.warehouse.history`.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from ..metadata_history import schema
from ..warehouse.history import METADATA_HISTORY
from .base import Context, Snapshot

METADATA_HISTORY_VIEW: Final = schema()


def metadata_history(snap: Snapshot, ctx: Context) -> pa.Table:
    rows = snap.table(METADATA_HISTORY).select(METADATA_HISTORY_VIEW.names)
    return rows.sort_by([("shard", "ascending"), ("log_offset", "ascending")])
