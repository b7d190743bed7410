"""Replica placement for new topics and partitions (Kafka's ``AdminUtils``,
docs/architecture.md#placement).

This is Apache Kafka's ``org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers``
(server-common, Kafka 3.x), reproduced step for step so that, given the same broker set,
start index and replica shift, it yields the same assignment as Kafka.

Rack-unaware placement, over the broker ids in ascending order:

- partition ``p``'s first replica is ``brokers[(p + start_index) % n]``;
- ``next_replica_shift`` grows by one each time ``p > 0`` and ``p % n == 0``;
- replica ``j + 1`` (``j >= 0``) is ``brokers[replica_index(first, shift, j, n)]`` where
  ``replica_index(first, shift, j, n) = (first + 1 + (shift + j) % (n - 1)) % n``.

Rack-aware placement first builds the rack-alternated broker list
(:func:`rack_alternated_brokers`), picks the first replica round-robin on it, then walks
the same ``replica_index`` sequence (with the shift multiplied by the number of racks),
skipping a broker whose rack already holds a replica while some rack holds none, and a
broker that already holds a replica while some broker holds none.

Unless ``fixed_start_index >= 0``, the start index and the initial replica shift are
drawn (in that order) from ``rng``, each uniformly from ``range(n)``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

__all__ = [
    "AdminOperationError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_replicas",
    "rack_alternated_brokers",
    "replica_index",
]


class AdminOperationError(ValueError):
    """The placement request cannot be served as asked (e.g. incomplete rack information).

    Kafka's ``AdminOperationException``.
    """


class InvalidReplicationFactorError(ValueError):
    """The replication factor is not positive or exceeds the number of brokers.

    Kafka's ``InvalidReplicationFactorException``.
    """


class InvalidPartitionsError(ValueError):
    """The number of partitions is not positive. Kafka's ``InvalidPartitionsException``."""


def replica_index(first_replica_index: int, replica_shift: int, j: int, num_brokers: int) -> int:
    """Index in the broker list of a partition's replica ``j + 1`` (``j >= 0``).

    ``(first + 1 + (shift + j) % (n - 1)) % n``: never ``first`` itself. Needs
    ``num_brokers >= 2``.
    """
    shift = 1 + (replica_shift + j) % (num_brokers - 1)
    return (first_replica_index + shift) % num_brokers


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: brokers interleaved rack by rack.

    Racks are taken in sorted order and the brokers of each rack in ascending id order;
    the result takes one broker from each rack in turn, skipping racks that have run out.
    For ``rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8`` it is
    ``[0, 3, 6, 1, 4, 7, 2, 5, 8]``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = max((len(column) for column in columns), default=0)
    for row in range(depth):
        result.extend(column[row] for column in columns if row < len(column))
    return result


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rack_aware: bool | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Assign ``replication_factor`` replicas to each of ``num_partitions`` partitions.

    Kafka's ``AdminUtils.assignReplicasToBrokers``.

    Args:
        brokers: broker id -> rack (``None`` when the broker has no rack).
        num_partitions: how many partitions to place.
        replication_factor: replicas per partition.
        fixed_start_index: when ``>= 0``, both the start index and the initial replica
            shift; otherwise both are drawn from ``rng``.
        start_partition_id: id of the first partition to place (``max(0, ...)``); used
            when adding partitions to an existing topic.
        rack_aware: ``None`` places rack-aware when every broker has a rack and
            rack-unaware when none has (a mix is an error); ``False`` ignores racks;
            ``True`` requires every broker to have a rack.
        rng: source of the random start index and shift (default ``random.Random()``).

    Returns:
        partition id -> replica list (the first replica is the preferred leader), in
        ascending partition id order.

    Raises:
        InvalidPartitionsError: ``num_partitions <= 0``.
        InvalidReplicationFactorError: ``replication_factor <= 0``, no brokers, or more
            replicas than brokers.
        AdminOperationError: rack-aware placement with a broker that has no rack.
    """
    if num_partitions <= 0:
        raise InvalidPartitionsError(
            f"Number of partitions must be larger than 0 (got {num_partitions})."
        )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0 (got {replication_factor})."
        )
    if not brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: 0 "
            "(no brokers are available)."
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )

    without_rack = sorted(broker for broker, rack in brokers.items() if rack is None)
    if rack_aware is False or (rack_aware is None and len(without_rack) == len(brokers)):
        broker_list = sorted(brokers)
        start_index, replica_shift = _start_and_shift(fixed_start_index, len(broker_list), rng)
        return _assign_rack_unaware(
            broker_list,
            num_partitions,
            replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
            start_partition_id=start_partition_id,
        )
    if without_rack:
        with_rack = sorted(broker for broker, rack in brokers.items() if rack is not None)
        if rack_aware:
            detail = "rack-aware placement was requested"
        else:
            detail = f"brokers {with_rack} have a rack"
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment: "
            f"brokers {without_rack} have no rack but {detail}. Give every broker a rack, "
            "or ask for rack-unaware placement (rack_aware=False)."
        )
    racks = {broker: rack for broker, rack in brokers.items() if rack is not None}
    start_index, replica_shift = _start_and_shift(fixed_start_index, len(racks), rng)
    return _assign_rack_aware(
        racks,
        num_partitions,
        replication_factor,
        start_index=start_index,
        replica_shift=replica_shift,
        start_partition_id=start_partition_id,
    )


def _start_and_shift(fixed_start_index: int, n: int, rng: random.Random | None) -> tuple[int, int]:
    """Kafka draws the start index first, then the replica shift (when not fixed)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    source = rng if rng is not None else random.Random()
    start_index = source.randrange(n)
    replica_shift = source.randrange(n)
    return start_index, replica_shift


def _assign_rack_unaware(
    broker_list: list[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int,
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokersRackUnaware``."""
    n = len(broker_list)
    partition_id = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            replica_shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_list[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[replica_index(first, replica_shift, j, n)])
        result[partition_id] = replicas
        partition_id += 1
    return result


def _assign_rack_aware(
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int,
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokersRackAware``."""
    num_racks = len(set(racks.values()))
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    partition_id = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            replica_shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, replica_shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # Skip the broker if its rack already holds a replica while some rack holds
                # none, or if it already holds a replica while some broker holds none.
                rack_ok = rack not in racks_with_replicas or len(racks_with_replicas) == num_racks
                broker_ok = broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        result[partition_id] = replicas
        partition_id += 1
    return result
