"""``skipped``: records the views left out, per key: poison (undecodable) or fenced."""

from __future__ import annotations

from typing import Final

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..tables import SKIPPED
from .base import Context, Snapshot, to_table

SKIPPED_VIEW: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.string()),
        ("kind", pa.string()),
        ("records", pa.int64()),
        ("last_offset", pa.int64()),
        ("last_error", pa.string()),
    ]
)


def skipped(snap: Snapshot, ctx: Context) -> pa.Table:
    rows = snap.frame(SKIPPED)
    if rows.empty:
        return SKIPPED_VIEW.empty_table()
    frame = rows.assign(key=rows["key"].map(lambda k: None if k is None else "0x" + k.hex()))
    frame = frame.sort_values(["topic", "partition", "last_offset"])
    return to_table(pd.DataFrame(frame), SKIPPED_VIEW)
