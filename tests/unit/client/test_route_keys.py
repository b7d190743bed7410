"""A client's route table keeps only the metadata records routes need."""

from __future__ import annotations

from kafkacoord.client.routes import route_keys
from kafkacoord.codecs import encode_key
from kafkacoord.codecs.models import (
    ControllerKey,
    NodeKey,
    PartitionKey,
    RebalanceKey,
    TopicKey,
)

OFFSETS = "__kc_offsets"


def test_routes_want_the_controller_nodes_and_only_the_offsets_partitions() -> None:
    wants = route_keys(OFFSETS)
    assert wants(encode_key(ControllerKey()))
    assert wants(encode_key(NodeKey(7)))
    assert all(wants(encode_key(PartitionKey(OFFSETS, p))) for p in (0, 63, 64, 10_000))
    # Neither another topic's partitions, nor a topic whose name extends this one's.
    assert not wants(encode_key(PartitionKey("orders", 0)))
    assert not wants(encode_key(PartitionKey(OFFSETS + "2", 0)))
    assert not wants(encode_key(PartitionKey("__kc_offset", 0)))
    assert not wants(encode_key(TopicKey(OFFSETS)))
    assert not wants(encode_key(RebalanceKey()))


def test_unknown_type_tags_pass_so_the_follower_reports_them() -> None:
    assert route_keys(OFFSETS)(bytes((99, 1)) + b"garbage")
