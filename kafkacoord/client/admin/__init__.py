"""Admin side: the controller admin client, metadata snapshots, reassignment files and the
cluster summary of ``kafkacoord status`` and the console."""

from .controller_admin import ControllerAdmin, read_metadata

__all__ = ["ControllerAdmin", "read_metadata"]
