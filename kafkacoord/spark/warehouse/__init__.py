"""The views' warehouse: one Delta Lake table per table (no Spark needed to read)."""

from .delta import SNAPSHOT, TABLES_DIR, Manifest, Warehouse
from .rows import DELETED, KEY, AlreadyAppliedError

__all__ = ["DELETED", "KEY", "SNAPSHOT", "TABLES_DIR", "AlreadyAppliedError", "Manifest",
           "Warehouse"]  # fmt: skip
