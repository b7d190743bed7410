"""The node agent services embed to host replicas of controller-managed topics."""

from .agent import NodeAgent
from .replicas import PartitionHandler, ReplicaManager, Role, Transition

__all__ = ["NodeAgent", "PartitionHandler", "ReplicaManager", "Role", "Transition"]
