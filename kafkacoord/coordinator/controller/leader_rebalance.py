"""Auto leader rebalance (Kafka's ``checkAndTriggerAutoLeaderRebalance``).

Kafka's ``KafkaController.checkAndTriggerAutoLeaderRebalance``:

1. Leave out topics queued for deletion, then group the remaining partitions by their
   preferred replica, ``AR[0]``.
2. For each broker, ``imbalance = (partitions it prefers but does not lead) /
   (partitions it prefers)``.
3. For every broker whose imbalance is above ``leader.imbalance.per.broker.percentage``
   (default 10%), run a preferred election for its partitions not led by it, but only
   those whose preferred replica is live and in the ISR and that have no reassignment or
   preferred election in flight.

A partition that has no entry in ``leaders`` has no leadership information yet: like in
Kafka it counts towards its preferred broker's total but never as "not led by it". A
partition whose leader is ``None`` (no leader, Kafka's ``-1``) does count as not led by
its preferred replica. Partitions with an empty replica list have no preferred replica
and are ignored.

Kafka's ZooKeeper controller skips the whole round while *any* partition is being
reassigned; here the check is per partition (``in_flight``). A caller wanting Kafka's
stricter behaviour simply does not call :func:`partitions_to_rebalance` during a
reassignment.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypeAlias

from kafkacoord.coordinator.controller.election import preferred_leader

__all__ = ["PartitionKey", "leader_imbalance", "partitions_to_rebalance"]

PartitionKey: TypeAlias = tuple[str, int]
"""``(topic, partition)``."""


def _by_preferred_broker(
    assignment: Mapping[PartitionKey, Sequence[int]], excluded_topics: Collection[str]
) -> dict[int, list[PartitionKey]]:
    excluded = frozenset(excluded_topics)
    groups: dict[int, list[PartitionKey]] = {}
    for key in sorted(assignment):
        replicas = assignment[key]
        if key[0] in excluded or not replicas:
            continue
        groups.setdefault(replicas[0], []).append(key)
    return groups


def _not_led_by(
    broker: int, keys: Sequence[PartitionKey], leaders: Mapping[PartitionKey, int | None]
) -> list[PartitionKey]:
    return [key for key in keys if key in leaders and leaders[key] != broker]


def leader_imbalance(
    assignment: Mapping[PartitionKey, Sequence[int]],
    leaders: Mapping[PartitionKey, int | None],
    *,
    excluded_topics: Collection[str] = (),
) -> dict[int, float]:
    """Leader imbalance ratio per preferred broker.

    For each broker that is the preferred replica (``AR[0]``) of at least one partition:
    (partitions whose preferred replica is that broker but whose leader is not) /
    (partitions whose preferred replica is that broker). Topics in ``excluded_topics``
    (queued for deletion) are left out of both counts. Keys are in ascending broker order.
    """
    groups = _by_preferred_broker(assignment, excluded_topics)
    return {
        broker: len(_not_led_by(broker, keys, leaders)) / len(keys)
        for broker, keys in sorted(groups.items())
    }


def partitions_to_rebalance(
    assignment: Mapping[PartitionKey, Sequence[int]],
    leaders: Mapping[PartitionKey, int | None],
    isr: Mapping[PartitionKey, Collection[int]],
    live: Collection[int],
    *,
    threshold_percent: float = 10.0,
    excluded_topics: Collection[str] = (),
    in_flight: Collection[PartitionKey] = (),
    max_partitions: int | None = None,
) -> list[PartitionKey]:
    """Partitions that should get a preferred replica election now.

    For each broker whose :func:`leader_imbalance` is strictly above
    ``threshold_percent / 100``: its partitions whose leader is not the preferred replica,
    keeping only those whose preferred replica is live and in the ISR (a partition missing
    from ``isr`` has an empty ISR) and that are not in ``in_flight`` (reassignment or
    preferred election under way). Topics in ``excluded_topics`` (queued for deletion) are
    neither counted nor returned.

    Order is deterministic: brokers by descending imbalance, ties by ascending broker id;
    within a broker, partitions by ``(topic, partition)``. At most ``max_partitions``
    partitions are returned (``None``: no cap), so a cap favours the most imbalanced
    brokers.
    """
    if max_partitions is not None and max_partitions < 0:
        raise ValueError(f"max_partitions must be >= 0 or None (got {max_partitions})")
    groups = _by_preferred_broker(assignment, excluded_topics)
    threshold = threshold_percent / 100
    busy = frozenset(in_flight)
    live_set = frozenset(live)

    imbalanced: list[tuple[float, int, list[PartitionKey]]] = []
    for broker, keys in groups.items():
        not_led = _not_led_by(broker, keys, leaders)
        ratio = len(not_led) / len(keys)
        if ratio > threshold:
            imbalanced.append((ratio, broker, not_led))
    imbalanced.sort(key=lambda item: (-item[0], item[1]))

    result: list[PartitionKey] = []
    for _, _, not_led in imbalanced:
        for key in not_led:
            if max_partitions is not None and len(result) >= max_partitions:
                return result
            if key in busy:
                continue
            if preferred_leader(assignment[key], isr.get(key, ()), live_set) is None:
                continue
            result.append(key)
    return result
