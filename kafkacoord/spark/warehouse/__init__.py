"""The warehouse: keyed Parquet tables with a versioned manifest (no Spark needed to read)."""

from .manifest import DataFile, Manifest
from .store import AlreadyAppliedError, Warehouse

__all__ = ["AlreadyAppliedError", "DataFile", "Manifest", "Warehouse"]
