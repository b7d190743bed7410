"""Admin side: the controller admin client, metadata snapshots, reassignment files."""

from .controller_admin import ControllerAdmin, read_metadata

__all__ = ["ControllerAdmin", "read_metadata"]
