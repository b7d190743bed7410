"""Epoch fencing of the internal topics, read side.

The rules themselves are pure and shared with every other reader of the log (the
controller's image, the Spark source): :mod:`kafkacoord.codecs.fencing`. This
module adds what needs consumed messages: filtering a chunk of ``confluent_kafka``
messages by leader epoch.
"""

from __future__ import annotations

from typing import cast

from confluent_kafka import Message

from kafkacoord.codecs.fencing import (
    EPOCH_HEADER,
    ControllerEpochFence,
    Headers,
    LeaderEpochFence,
    controller_epoch_of,
    epoch_headers,
    header_epoch,
    marker_epoch,
)


def admitted_messages(
    fence: LeaderEpochFence, messages: list[Message]
) -> tuple[list[Message], int]:
    """The messages ``fence`` admits, in order, and how many it fenced."""
    admitted = [
        m for m in messages if fence.admit(m.key(), m.value(), cast(Headers | None, m.headers()))
    ]
    return admitted, len(messages) - len(admitted)


__all__ = [
    "EPOCH_HEADER",
    "ControllerEpochFence",
    "LeaderEpochFence",
    "admitted_messages",
    "controller_epoch_of",
    "epoch_headers",
    "header_epoch",
    "marker_epoch",
]
