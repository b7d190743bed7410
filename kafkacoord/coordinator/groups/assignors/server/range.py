"""Kafka's server-side ``RangeAssignor`` (``"range"``), sticky.

Per topic, with ``P`` partitions and its ``N`` subscribers in member id order, every subscriber
gets ``P // N`` partitions and ``P % N`` of them one more. On a fresh group that is the classic
range: the first ``P % N`` subscribers take ``P // N + 1`` consecutive partitions, the others
``P // N``. Example from Kafka's docs: members M0, M1, topics T1 and T2 with 3 partitions each
give ``M0: T1[0, 1], T2[0, 1]`` and ``M1: T1[2], T2[2]``.

Stickiness follows the server-side ``RangeAssignor`` of Kafka 3.5 to 3.8: in member id order,
each subscriber keeps its lowest ``P // N`` current partitions of the topic, and one more while
extra partitions remain if it had more; the partitions left over, in ascending order, then go
in runs to the subscribers below their share, in member id order, those still allowed an extra
partition taking one more. So a member joining or leaving only moves what the new shares
require, and with unchanged members the assignment stays as it is.

Co-partitioning: the rule is applied per topic and depends only on the topic's partition count,
its subscribers and their current partitions of it. Topics with the same partition count and the
same subscribers therefore start out with the same partition numbers per member and keep them
through every later join and leave (Kafka's condition for joins: every member subscribes to the
same topics, and they have equal counts).

Kafka 3.9 rewrote the assignor (KAFKA-16944) without that stickiness: it lays the ranges out
afresh each time, static members first by instance id. Both give the same assignment while the
members stay the same; kafkacoord keeps the sticky rule so that a join or leave does not shift
every member's ranges. Racks are ignored, as by Kafka's range assignors: the ranges are fixed by
position, not placement.
"""

from __future__ import annotations

from kafkacoord.coordinator.groups.assignors.server.model import (
    GroupAssignment,
    Holdings,
    Members,
    PartitionRacks,
    TopicCounts,
    finalize,
    normalize_group,
)

__all__ = ["range_assign"]


def range_assign(
    members: Members, topics: TopicCounts, racks: PartitionRacks | None = None
) -> GroupAssignment:
    """The group's new target assignment (see the module docstring); ``racks`` is ignored."""
    del racks
    if not members:
        return {}
    group = normalize_group(members, topics)
    owned = group.owned
    holdings: Holdings = [{} for _ in group.member_ids]
    for t, subscribers in enumerate(group.subscribers()):
        count = group.counts[t]
        min_quota, extra = divmod(count, len(subscribers))
        kept = bytearray(count)
        # (member, room) in member id order: the subscribers that may still receive partitions.
        unfilled: list[tuple[int, int]] = []
        for m in subscribers:
            current = owned[m].get(t)
            if not current:
                unfilled.append((m, min_quota))
                continue
            if len(current) > min_quota and extra:
                extra -= 1
                keep = current[: min_quota + 1]
                room = -1
            else:
                keep = current[:min_quota]
                room = min_quota - len(keep)
            if keep:
                holdings[m][t] = keep
                for p in keep:
                    kept[p] = 1
            if room >= 0:
                unfilled.append((m, room))
        free = [p for p in range(count) if not kept[p]]
        i = 0
        for m, room in unfilled:
            if i == len(free):
                break
            share = room
            if extra:
                share += 1
                extra -= 1
            if share:
                holdings[m].setdefault(t, []).extend(free[i : i + share])
                i += share
    return finalize(group, holdings)
