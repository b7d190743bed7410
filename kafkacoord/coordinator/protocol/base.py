"""Request and response bodies: strict pydantic models carried as JSON.

The envelope (client id, correlation id, api, deadline) is Avro like every other
record; bodies are JSON validated by pydantic because they are transient (short
retention, never replayed into state) and benefit from field-level error messages.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict

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
    topic: str
    partition: int
