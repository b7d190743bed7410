"""The warehouse: keyed Parquet tables with a versioned manifest (no Spark needed to read)."""

from pathlib import Path

from .delta import SNAPSHOT, DeltaWarehouse
from .manifest import DataFile, Manifest
from .store import AlreadyAppliedError, Warehouse

# Either table format; the job writes one, readers open whichever a directory holds.
Store = Warehouse | DeltaWarehouse


def open_warehouse(root: Path | str) -> Store:
    """The warehouse at ``root``: Delta tables if it has a Delta snapshot, else Parquet."""
    return DeltaWarehouse(root) if (Path(root) / SNAPSHOT).is_dir() else Warehouse(root)


__all__ = ["AlreadyAppliedError", "DataFile", "DeltaWarehouse", "Manifest", "Store",
           "Warehouse", "open_warehouse"]  # fmt: skip
