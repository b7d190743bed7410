"""``OffsetCommit.reset``: kafkacoord's own field, sent only when set, so a commit that
is not a reset encodes as before and reaches a daemon that predates the field."""

from __future__ import annotations

import json

import pytest

from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.coordinator.protocol.apis import (
    APIS_BY_KEY,
    RequestBodyError,
    decode_request,
    encode_body,
)


def _commit(**extra: object) -> g.OffsetCommit:
    partitions = [g.CommitPartition(partition=0, offset=5)]
    return g.OffsetCommit(group_id="g", topics=[g.CommitTopic(name="t", partitions=partitions)],
                          **extra)  # type: ignore[arg-type]  # fmt: skip


def test_a_commit_that_is_no_reset_encodes_without_the_field() -> None:
    assert "reset" not in json.loads(encode_body(_commit()))
    assert json.loads(encode_body(_commit(reset=True)))["reset"] is True


def test_both_decode_and_a_reset_keeps_its_mark() -> None:
    spec = APIS_BY_KEY[8]
    assert decode_request(spec, encode_body(_commit())).reset is False
    assert decode_request(spec, encode_body(_commit(reset=True))).reset is True
    with pytest.raises(RequestBodyError):
        decode_request(spec, b'{"group_id": "g", "topics": [], "reset": [1]}')
