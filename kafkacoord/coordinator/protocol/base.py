"""Request and response bodies: strict pydantic models carried as JSON.

The envelope (client id, correlation id, api, deadline) is Avro like every other
record; bodies are JSON validated by pydantic because they are transient (short
retention, never replayed into state) and benefit from field-level error messages.
Request fields are bounded by the aliases of :mod:`.types`.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict

from .types import Int32, TopicText

PUSH_CORRELATION_ID: Final = -1
"""The correlation id of a frame a daemon sends unasked (a hint to a consumer group
member); requests are numbered from 0 up."""


class Body(BaseModel):
    """Base of every request and response body; bytes travel as base64."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )


class Empty(Body):
    pass


class TopicPartitionRef(Body):
    # Replies carry it too: a topic the image holds must never fail one.
    topic: TopicText
    partition: Int32
