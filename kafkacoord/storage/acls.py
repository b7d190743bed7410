"""The Kafka ACLs kafkacoord needs on a secured cluster, as data.

One list (:func:`kafkacoord_acls`) is both printed as ``kafka-acls.sh`` commands for a
cluster admin (``kafkacoord acls``) and applied by the secured embedded broker, so what an
admin is told to run is what the tests prove sufficient.

kafkacoord's principal alone writes and alters the internal topics (a prefixed pattern on
the topic prefix); readers (clients' metadata followers, the views) may read them.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import groupby

# Where confluent_kafka defines them (its admin package re-exports them untyped).
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

__all__ = [
    "CLUSTER_NAME",
    "DEFAULT_PRINCIPAL",
    "GROUP_PREFIXES",
    "Acl",
    "Resource",
    "acl_bindings",
    "kafka_acls_commands",
    "kafkacoord_acls",
]

DEFAULT_PRINCIPAL = "User:kafkacoord"
# The groups kafkacoord's assign-only consumers name (``kafkacoord-<node>-loader-replay``,
# the clients' ``kc-routes-<id>-metadata``, the views' ``kafkacoord-spark-reader``...).
# librdkafka looks up their coordinator (FindCoordinator: Describe) even though none is
# joined; denied, every poll reports GROUP_AUTHORIZATION_FAILED. The controller election
# group, which is joined, is ``<topic prefix>controller-<id>``: kafkacoord's alone.
GROUP_PREFIXES = ("kafkacoord-", "kc-")
CLUSTER_NAME = "kafka-cluster"  # Kafka's one cluster resource


class Resource(Enum):
    """Kafka's ACL resource types, valued as ``kafka-acls.sh`` names them."""

    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class Acl:
    """One allow ACL: ``principal`` may do ``operation`` on the resource, from any host."""

    principal: str
    resource: Resource
    name: str
    prefixed: bool
    operation: str  # Kafka's operation name: Read, Write, AlterConfigs, ...

    def pattern(self) -> tuple[str, str, str, bool]:
        """Principal and resource pattern: one ``kafka-acls.sh`` line each."""
        return self.principal, self.resource.value, self.name, self.prefixed


_TOPIC_OWNER_OPS = (
    "Read", "Write", "Describe", "Create", "Alter", "AlterConfigs", "DescribeConfigs", "Delete",
)  # fmt: skip
_GROUP_OWNER_OPS = ("Read", "Describe", "Delete")
_TRANSACTION_OPS = ("Write", "Describe")
_READER_TOPIC_OPS = ("Read", "Describe")


def kafkacoord_acls(
    principal: str = DEFAULT_PRINCIPAL,
    readers: Sequence[str] = (),
    topic_prefix: str = "__kc_",
) -> list[Acl]:
    """Every ACL kafkacoord's ``principal`` and the read-only ``readers`` need, sorted."""
    acls = [
        *(Acl(principal, Resource.TOPIC, topic_prefix, True, op) for op in _TOPIC_OWNER_OPS),
        # The controller's transactional id is ``<prefix>controller``.
        *(
            Acl(principal, Resource.TRANSACTIONAL_ID, topic_prefix, True, op)
            for op in _TRANSACTION_OPS
        ),
        *(
            Acl(principal, Resource.GROUP, group, True, op)
            for group in (topic_prefix, *GROUP_PREFIXES)
            for op in _GROUP_OWNER_OPS
        ),
        # The coordinator reads every topic's partition count and offsets (ListOffsets).
        Acl(principal, Resource.TOPIC, "*", False, "Describe"),
    ]
    for reader in readers:
        acls += [Acl(reader, Resource.TOPIC, topic_prefix, True, op) for op in _READER_TOPIC_OPS]
        # Describe only: readers never join a group nor commit (OffsetCommit needs Read).
        acls += [Acl(reader, Resource.GROUP, group, True, "Describe") for group in GROUP_PREFIXES]
        # The views sample the end offsets of the topics groups commit for (lag).
        acls.append(Acl(reader, Resource.TOPIC, "*", False, "Describe"))
    return sorted(set(acls), key=lambda acl: (*acl.pattern(), acl.operation))


def kafka_acls_commands(
    acls: Iterable[Acl],
    bootstrap: str = "BROKER:9092",
    command_config: str = "admin.properties",
) -> list[str]:
    """One ``kafka-acls.sh --add`` line per principal and resource pattern."""
    lines = []
    for (principal, resource, name, prefixed), group in groupby(
        sorted(acls, key=Acl.pattern), Acl.pattern
    ):
        args = [
            "kafka-acls.sh", "--bootstrap-server", bootstrap,
            "--command-config", command_config, "--add", "--allow-principal", principal,
        ]  # fmt: skip
        for acl in group:
            args += ["--operation", acl.operation]
        args += ["--cluster"] if resource == Resource.CLUSTER.value else [f"--{resource}", name]
        if prefixed:
            args += ["--resource-pattern-type", "prefixed"]
        lines.append(shlex.join(args))
    return lines


_RESOURCE_TYPES = {
    Resource.TOPIC: ResourceType.TOPIC,
    Resource.GROUP: ResourceType.GROUP,
    Resource.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
    Resource.CLUSTER: ResourceType.BROKER,  # librdkafka's name for Kafka's CLUSTER (4)
}


def acl_bindings(acls: Iterable[Acl]) -> list[AclBinding]:
    """The ACLs as confluent_kafka ``AclBinding``s, for ``AdminClient.create_acls``."""
    return [
        AclBinding(
            _RESOURCE_TYPES[acl.resource],
            CLUSTER_NAME if acl.resource is Resource.CLUSTER else acl.name,
            ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL,
            acl.principal,
            "*",
            _operation(acl.operation),
            AclPermissionType.ALLOW,
        )
        for acl in acls
    ]


def _operation(name: str) -> AclOperation:
    # "AlterConfigs" -> ALTER_CONFIGS, "IdempotentWrite" -> IDEMPOTENT_WRITE
    snake = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name))
    return AclOperation[snake.upper()]
