"""Leader-epoch fencing of a group shard's log, read side.

The rule itself is pure and shared with every other reader of the log (the
Spark source): :mod:`kafkacoord.codecs.fencing`. This module adds what needs
consumed messages: filtering a chunk of ``confluent_kafka`` messages.
"""

from __future__ import annotations

from typing import cast

from confluent_kafka import Message

from kafkacoord.codecs.fencing import (
    EPOCH_HEADER,
    Headers,
    epoch_headers,
    header_epoch,
    marker_epoch,
)
from kafkacoord.codecs.fencing import LeaderEpochFence as PureLeaderEpochFence


class LeaderEpochFence(PureLeaderEpochFence):
    """The pure fence, plus filtering of consumed messages."""

    def filter(self, messages: list[Message]) -> tuple[list[Message], int]:
        """The admitted messages, in order, and how many were fenced."""
        admitted = [
            m for m in messages if self.admit(m.key(), m.value(), cast(Headers | None, m.headers()))
        ]
        return admitted, len(messages) - len(admitted)


__all__ = [
    "EPOCH_HEADER",
    "LeaderEpochFence",
    "epoch_headers",
    "header_epoch",
    "marker_epoch",
]
