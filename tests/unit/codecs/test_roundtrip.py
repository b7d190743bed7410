"""Every record type round-trips through the record framing, and keys are canonical."""

from __future__ import annotations

import dataclasses
import struct
from io import BytesIO
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.codecs import (
    SPECS,
    CodecError,
    RecordType,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
    offset_commit_codec,
    partition_codec,
    record_type_of,
    schemas,
)
from kafkacoord.codecs.models import (
    AdminOffset,
    AvroModel,
    Cause,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ControllerKey,
    ControllerValue,
    DecisionKey,
    DecisionValue,
    GroupAdminKey,
    GroupAdminValue,
    GroupCause,
    GroupMember,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberState,
    NodeKey,
    NodeValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionKey,
    PartitionRacks,
    PartitionState,
    PartitionValue,
    Reassignment,
    RebalanceKey,
    RebalanceMove,
    RebalanceState,
    RebalanceValue,
    ShardLeaderKey,
    ShardLeaderValue,
    SubscribedTopic,
    TopicKey,
    TopicPartitions,
    TopicValue,
    Trigger,
)
from kafkacoord.codecs.records import encode_value_as

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# Bias towards the range edges so the varint encoder sees its longest encodings.
ints = st.one_of(
    st.sampled_from([INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX]), st.integers(INT_MIN, INT_MAX)
)
longs = st.one_of(
    st.sampled_from([LONG_MIN, LONG_MIN + 1, INT_MIN - 1, -1, 0, INT_MAX + 1, LONG_MAX]),
    st.integers(LONG_MIN, LONG_MAX),
)
# Unicode text: hypothesis' default alphabet covers all planes (no surrogates), plus a few
# hand-picked multi-byte strings.
texts = st.one_of(
    st.text(max_size=20), st.sampled_from(["", "ünïcødé", "日本語", "🦀🚀", "a\x00b"])
)
opt_texts = st.none() | texts
group_causes = st.builds(
    GroupCause,
    kind=texts,
    member_id=opt_texts,
    group_instance_id=opt_texts,
    client_id=opt_texts,
    client_host=opt_texts,
    detail=opt_texts,
)
blobs = st.binary(max_size=32)
int_arrays = st.lists(ints, max_size=6).map(tuple)
str_maps = st.dictionaries(texts, texts, max_size=4)

reassignments = st.builds(
    Reassignment,
    original_replicas=int_arrays,
    target_replicas=int_arrays,
    adding_replicas=int_arrays,
    removing_replicas=int_arrays,
    step=texts,
    started_ms=longs,
)

triggers = st.builds(
    Trigger,
    kind=texts,
    node_id=ints,
    heartbeat_ms=longs,
    principal=opt_texts,
    request_id=opt_texts,
    api=opt_texts,
    plan_id=opt_texts,
    plan_step=ints,
    imbalance=st.none() | st.floats(allow_nan=False),
)
decisions = st.builds(DecisionKey, controller_epoch=ints, sequence=longs)
causes = st.builds(Cause, decision=decisions, rule=texts)

members = st.builds(
    GroupMember,
    member_id=texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout_ms=ints,
    session_timeout_ms=ints,
    subscription=blobs,
    assignment=blobs,
    group_instance_id=opt_texts,
)

topic_partitions = st.lists(
    st.builds(TopicPartitions, topic=texts, partitions=int_arrays), max_size=3
).map(tuple)

KEYS: dict[RecordType, st.SearchStrategy[Any]] = {
    RecordType.CONTROLLER: st.just(ControllerKey()),
    RecordType.NODE: st.builds(NodeKey, node_id=ints),
    RecordType.TOPIC: st.builds(TopicKey, name=texts),
    RecordType.PARTITION: st.builds(PartitionKey, topic=texts, partition=ints),
    RecordType.GROUP_METADATA: st.builds(GroupMetadataKey, group=texts),
    RecordType.OFFSET_COMMIT: st.builds(OffsetCommitKey, group=texts, topic=texts, partition=ints),
    RecordType.SHARD_LEADER: st.just(ShardLeaderKey()),
    RecordType.GROUP_ADMIN: st.builds(GroupAdminKey, group=texts, request_id=texts),
    RecordType.REBALANCE: st.just(RebalanceKey()),
    RecordType.DECISION: decisions,
    RecordType.CONSUMER_GROUP_METADATA: st.builds(ConsumerGroupMetadataKey, group=texts),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: st.builds(
        ConsumerGroupPartitionMetadataKey, group=texts
    ),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: st.builds(
        ConsumerGroupMemberMetadataKey, group=texts, member_id=texts
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: st.builds(
        ConsumerGroupTargetAssignmentMetadataKey, group=texts
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: st.builds(
        ConsumerGroupTargetAssignmentMemberKey, group=texts, member_id=texts
    ),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: st.builds(
        ConsumerGroupCurrentMemberAssignmentKey, group=texts, member_id=texts
    ),
}

VALUES: dict[RecordType, st.SearchStrategy[Any]] = {
    RecordType.CONTROLLER: st.builds(
        ControllerValue,
        epoch=ints,
        node_id=ints,
        incarnation=texts,
        activated_ms=longs,
        endpoint=opt_texts,
    ),
    RecordType.NODE: st.builds(
        NodeValue,
        node_id=ints,
        incarnation=texts,
        node_epoch=longs,
        fenced=st.booleans(),
        registered_ms=longs,
        controller_epoch=ints,
        rack=opt_texts,
        endpoints=str_maps,
        shutting_down=st.booleans(),
        decision=st.none() | decisions,
    ),
    RecordType.TOPIC: st.builds(
        TopicValue,
        name=texts,
        topic_id=texts,
        num_partitions=ints,
        replication_factor=ints,
        created_ms=longs,
        controller_epoch=ints,
        configs=str_maps,
        deleting=st.booleans(),
    ),
    RecordType.PARTITION: st.builds(
        PartitionValue,
        topic=texts,
        partition=ints,
        state=st.sampled_from(PartitionState),
        replicas=int_arrays,
        isr=int_arrays,
        leader=ints,
        leader_epoch=ints,
        partition_epoch=ints,
        updated_ms=longs,
        controller_epoch=ints,
        reassignment=st.none() | reassignments,
        election=texts,
        elr=int_arrays,
        last_known_elr=int_arrays,
        cause=st.none() | causes,
    ),
    RecordType.GROUP_METADATA: st.builds(
        GroupMetadataValue,
        protocol_type=texts,
        generation=ints,
        state_timestamp_ms=longs,
        members=st.lists(members, max_size=5).map(tuple),
        protocol=opt_texts,
        leader=opt_texts,
        cause=st.none() | group_causes,
    ),
    RecordType.OFFSET_COMMIT: st.builds(
        OffsetCommitValue,
        offset=longs,
        metadata=texts,
        commit_timestamp_ms=longs,
        leader_epoch=ints,
        expire_timestamp_ms=st.none() | longs,
    ),
    RecordType.SHARD_LEADER: st.builds(
        ShardLeaderValue, leader_epoch=ints, node_id=ints, incarnation=texts, activated_ms=longs
    ),
    RecordType.DECISION: st.builds(
        DecisionValue, trigger=triggers, decided_ms=longs, controller_epoch=ints
    ),
    RecordType.REBALANCE: st.builds(
        RebalanceValue,
        proposal_id=texts,
        state=st.sampled_from(RebalanceState),
        goals=st.lists(texts, max_size=3).map(tuple),
        remove_nodes=int_arrays,
        moves=st.lists(
            st.builds(
                RebalanceMove,
                topic=texts,
                partition=ints,
                original_replicas=int_arrays,
                target_replicas=int_arrays,
            ),
            max_size=4,
        ).map(tuple),
        max_concurrent_moves_per_node=ints,
        max_concurrent_moves=ints,
        max_concurrent_leader_moves=ints,
        started_ms=longs,
        updated_ms=longs,
        controller_epoch=ints,
        message=texts,
    ),
    RecordType.CONSUMER_GROUP_METADATA: st.builds(
        ConsumerGroupMetadataValue, epoch=ints, cause=st.none() | group_causes
    ),
    RecordType.GROUP_ADMIN: st.builds(
        GroupAdminValue,
        action=texts,
        at_ms=longs,
        client_id=texts,
        principal=opt_texts,
        offsets=st.lists(
            st.builds(
                AdminOffset,
                topic=texts,
                partition=ints,
                before=st.none() | longs,
                after=st.none() | longs,
            ),
            max_size=3,
        ).map(tuple),
    ),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: st.builds(
        ConsumerGroupPartitionMetadataValue,
        topics=st.lists(
            st.builds(
                SubscribedTopic,
                topic=texts,
                num_partitions=ints,
                racks=st.lists(
                    st.builds(
                        PartitionRacks,
                        partition=ints,
                        racks=st.lists(texts, max_size=3).map(tuple),
                    ),
                    max_size=3,
                ).map(tuple),
            ),
            max_size=3,
        ).map(tuple),
    ),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: st.builds(
        ConsumerGroupMemberMetadataValue,
        client_id=texts,
        client_host=texts,
        subscribed_topic_names=st.lists(texts, max_size=4).map(tuple),
        rebalance_timeout_ms=ints,
        instance_id=opt_texts,
        rack_id=opt_texts,
        subscribed_topic_regex=opt_texts,
        server_assignor=opt_texts,
        classic_member_metadata=st.none()
        | st.builds(
            ClassicMemberMetadata,
            session_timeout_ms=ints,
            supported_protocols=st.lists(
                st.builds(ClassicProtocol, name=texts, metadata=blobs), max_size=3
            ).map(tuple),
        ),
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: st.builds(
        ConsumerGroupTargetAssignmentMetadataValue, assignment_epoch=ints
    ),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: st.builds(
        ConsumerGroupTargetAssignmentMemberValue, partitions=topic_partitions
    ),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: st.builds(
        ConsumerGroupCurrentMemberAssignmentValue,
        member_epoch=ints,
        previous_member_epoch=ints,
        state=st.sampled_from([s for s in MemberState if s is not MemberState.UNKNOWN]),
        assigned_partitions=topic_partitions,
        partitions_pending_revocation=topic_partitions,
    ),
}

ALL_TYPES = sorted(SPECS)


def _newest_value_version(rtype: RecordType) -> int:
    return max(SPECS[rtype].value_versions)


def _newest_key_version(rtype: RecordType) -> int:
    return max(SPECS[rtype].key_versions)


def test_strategies_cover_every_record_type() -> None:
    # A new record type in SPECS must get a strategy here, or it would go untested.
    assert set(KEYS) == set(SPECS) == set(VALUES)
    assert set(SPECS) == set(RecordType)


def test_current_versions() -> None:
    # OffsetCommitValue gained leader_epoch in v2, NodeValue roles in v2, PartitionValue the
    # ELR (KIP-966) in v2; both the cause of the decision that wrote them in v3.
    # Group records their rebalance's cause in v2.
    evolved = {RecordType.OFFSET_COMMIT: 2, RecordType.NODE: 3, RecordType.CONTROLLER: 2,
               RecordType.PARTITION: 3, RecordType.GROUP_METADATA: 2,
               RecordType.CONSUMER_GROUP_METADATA: 2}  # fmt: skip
    for rtype in SPECS:
        assert _newest_key_version(rtype) == 1
        assert _newest_value_version(rtype) == evolved.get(rtype, 1)


@pytest.mark.parametrize("rtype", ALL_TYPES, ids=lambda t: t.name)
@settings(max_examples=60)
@given(data=st.data())
def test_record_round_trip(rtype: RecordType, data: st.DataObject) -> None:
    key = data.draw(KEYS[rtype], label="key")
    value = data.draw(VALUES[rtype], label="value")
    assert type(key) is SPECS[rtype].key_cls
    assert type(value) is SPECS[rtype].value_cls

    raw_key, raw_value = encode_record(key, value)
    assert raw_value is not None

    decoded_key, decoded_value = decode_record(raw_key, raw_value)
    assert type(decoded_key) is type(key)
    assert type(decoded_value) is type(value)
    assert decoded_key == key
    assert decoded_value == value

    # Framing: [type tag][key version] and a 2-byte big-endian value version.
    assert raw_key[0] == rtype
    assert raw_key[1] == _newest_key_version(rtype)
    assert record_type_of(raw_key) is rtype
    assert struct.unpack(">H", raw_value[:2])[0] == _newest_value_version(rtype)

    # The single-part functions agree with the record-level ones.
    assert encode_key(key) == raw_key
    assert encode_value(value) == raw_value
    assert decode_key(raw_key) == key
    assert decode_value(rtype, raw_value) == value


@pytest.mark.parametrize("rtype", ALL_TYPES, ids=lambda t: t.name)
@settings(max_examples=40)
@given(data=st.data())
def test_tombstone_round_trip(rtype: RecordType, data: st.DataObject) -> None:
    key = data.draw(KEYS[rtype])
    raw_key, raw_value = encode_record(key, None)
    assert raw_value is None
    assert decode_record(raw_key, None) == (key, None)


@pytest.mark.parametrize("rtype", ALL_TYPES, ids=lambda t: t.name)
@settings(max_examples=60)
@given(data=st.data())
def test_keys_are_canonical(rtype: RecordType, data: st.DataObject) -> None:
    first = data.draw(KEYS[rtype], label="first")
    second = data.draw(KEYS[rtype], label="second")
    # An equal key built independently (not the same object) encodes to the same bytes.
    rebuilt = type(first)(**first.to_avro())
    assert rebuilt == first
    assert encode_key(rebuilt) == encode_key(first)
    # And distinct keys never collide, or compaction would merge unrelated keys.
    assert (encode_key(first) == encode_key(second)) == (first == second)


def test_keys_of_different_types_never_collide() -> None:
    # Same field values, different record types: the tag keeps them apart.
    assert encode_key(NodeKey(3)) != encode_key(PartitionKey("", 3))
    assert encode_key(TopicKey("c")) != encode_key(GroupMetadataKey("c"))


def test_partition_value_with_and_without_reassignment() -> None:
    base = PartitionValue(
        topic="orders",
        partition=7,
        state=PartitionState.ONLINE,
        replicas=(1, 2, 3),
        isr=(1, 2),
        leader=1,
        leader_epoch=4,
        partition_epoch=9,
        updated_ms=1_700_000_000_000,
        controller_epoch=5,
    )
    moving = dataclasses.replace(
        base,
        reassignment=Reassignment(
            original_replicas=(1, 2, 3),
            target_replicas=(4, 5, 6),
            adding_replicas=(4, 5, 6),
            removing_replicas=(1, 2, 3),
            step="ADDING",
            started_ms=1_700_000_000_123,
        ),
        election="reassigned",
    )
    key = PartitionKey("orders", 7)
    for value in (base, moving):
        _, decoded = decode_record(*encode_record(key, value))
        assert decoded == value
    assert isinstance(moving.reassignment, Reassignment)
    decoded_moving = decode_record(*encode_record(key, moving))[1]
    assert isinstance(decoded_moving, PartitionValue)
    assert decoded_moving.reassignment == moving.reassignment
    assert decoded_moving.reassignment is not None
    assert decoded_moving.reassignment.target_replicas == (4, 5, 6)
    # Arrays come back as tuples, so the frozen model stays hashable field by field.
    assert isinstance(decoded_moving.replicas, tuple)
    assert isinstance(decoded_moving.reassignment.adding_replicas, tuple)
    assert encode_value(base) != encode_value(moving)


def test_group_metadata_with_several_members() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=INT_MAX,
        state_timestamp_ms=LONG_MAX,
        members=(
            GroupMember("m-1", "client-α", "/10.0.0.1", 300_000, 45_000, b"\x00sub", b"", None),
            GroupMember(
                "m-2", "client-β", "/10.0.0.2", INT_MIN, INT_MAX, b"", b"\xffasg", "static-2"
            ),
            GroupMember("m-3", "🦀", "", 0, -1, bytes(range(256)), bytes(range(255, -1, -1))),
        ),
        protocol="cooperative-sticky",
        leader="m-2",
    )
    decoded = decode_record(*encode_record(GroupMetadataKey("g-日本"), value))[1]
    assert decoded == value
    assert isinstance(decoded, GroupMetadataValue)
    assert [m.member_id for m in decoded.members] == ["m-1", "m-2", "m-3"]
    assert decoded.members[1].group_instance_id == "static-2"
    assert decoded.members[2].subscription == bytes(range(256))


def test_avro_range_edges_round_trip() -> None:
    value = OffsetCommitValue(
        offset=LONG_MAX,
        metadata="",
        commit_timestamp_ms=LONG_MIN,
        leader_epoch=INT_MIN,
        expire_timestamp_ms=LONG_MIN,
    )
    key = OffsetCommitKey("", "", INT_MIN)
    assert decode_record(*encode_record(key, value)) == (key, value)
    node = NodeKey(INT_MAX)
    assert decode_key(encode_key(node)) == node


def test_controller_key_is_just_its_header() -> None:
    # An empty record encodes to no bytes: the key is the 2-byte header alone.
    assert encode_key(ControllerKey()) == bytes((RecordType.CONTROLLER, 1))


@pytest.mark.parametrize(
    "model",
    [
        ControllerValue(1, 1, "x", 0),
        OffsetCommitValue(1, "", 0),
        GroupMember("m", "c", "h", 1, 1, b"", b""),
    ],
    ids=["value", "value2", "nested"],
)
def test_encode_key_rejects_non_keys(model: AvroModel) -> None:
    with pytest.raises(CodecError, match=r"^key: .*is not a record key"):
        encode_key(model)


@pytest.mark.parametrize(
    "model",
    [ControllerKey(), OffsetCommitKey("g", "t", 0), Reassignment((), (), (), (), "s", 0)],
    ids=["key", "key2", "nested"],
)
def test_encode_value_rejects_non_values(model: AvroModel) -> None:
    with pytest.raises(CodecError, match=r"^value: .*is not a record value"):
        encode_value(model)


def test_node_value_v1_reads_as_v2_with_no_roles() -> None:
    old = encode_value_as(NodeValue(4, "inc", 2, False, 10, 3, rack="r1"), 1)
    decoded = decode_value(RecordType.NODE, old)
    assert decoded == NodeValue(4, "inc", 2, False, 10, 3, rack="r1", roles=())
    assert encode_value(decoded)[:2] == b"\x00\x03"


def test_partition_value_v1_reads_as_v2_with_empty_elr() -> None:
    value = PartitionValue("t", 0, PartitionState.ONLINE, (1, 2), (1,), 1, 3, 4, 10, 2)
    decoded = decode_value(RecordType.PARTITION, encode_value_as(value, 1))
    assert decoded == value and decoded.elr == () and decoded.last_known_elr == ()
    moved = PartitionValue("t", 0, PartitionState.OFFLINE, (1, 2), (), -1, 4, 5, 11, 2,
                           elr=(2, 1), last_known_elr=(1,))  # fmt: skip
    assert decode_value(RecordType.PARTITION, encode_value(moved)) == moved


# -- the hand-written partition codec (codecs/partition_codec.py) against fastavro ----


def _fastavro(name: str, version: int, datum: dict[str, Any]) -> bytes:
    out = BytesIO()
    fastavro.schemaless_writer(out, schemas.parsed(name, version), datum)
    return out.getvalue()


def assert_same_as_fastavro(value: PartitionValue) -> None:
    body = _fastavro("partition_value", partition_codec.VALUE_VERSION, value.to_avro())
    assert partition_codec.encode_value_body(value) == body
    encoded = encode_value(value)
    assert encoded[2:] == body
    assert decode_value(RecordType.PARTITION, encoded) == value
    key = PartitionKey(value.topic, value.partition)
    key_body = _fastavro("partition_key", partition_codec.KEY_VERSION, key.to_avro())
    assert partition_codec.encode_key_body(key) == key_body
    assert decode_key(encode_key(key)) == key
    # The pair path builds the key from the value's own fields.
    assert decode_record(encode_key(key), encoded) == (key, value)


@settings(max_examples=300)
@given(VALUES[RecordType.PARTITION])
def test_bytes_match_fastavro_and_read_back(value: PartitionValue) -> None:
    assert_same_as_fastavro(value)


def test_long_arrays_and_large_ids_match_fastavro() -> None:
    # Past the one-byte block count (63 items) and the one-byte ids (63), negative too.
    many = (*range(-5, 65), 1 << 20, -(1 << 31), (1 << 31) - 1)
    value = PartitionValue("t" * 300, 1 << 30, PartitionState.OFFLINE, many, many[::-1], -1,
                           (1 << 31) - 1, 70, -(1 << 63), 200, Reassignment(many, (), many, (7,),
                           "ü" * 70, 1 << 62), "ünïcødé", many, (300,))  # fmt: skip
    assert_same_as_fastavro(value)
    decision = DecisionKey(-(1 << 31), -(1 << 63))
    assert_same_as_fastavro(dataclasses.replace(value, cause=Cause(decision, "r" * 64)))


# -- the hand-written offset commit codec (codecs/offset_commit_codec.py) against fastavro --


@settings(max_examples=300)
@given(VALUES[RecordType.OFFSET_COMMIT])
def test_offset_commit_bytes_match_fastavro_and_read_back(value: OffsetCommitValue) -> None:
    body = _fastavro("offset_commit_value", offset_commit_codec.VALUE_VERSION, value.to_avro())
    assert offset_commit_codec.encode_value_body(value) == body
    encoded = encode_value(value)
    assert encoded[2:] == body
    decoded = decode_value(RecordType.OFFSET_COMMIT, encoded)
    assert decoded == value
    # What fastavro reads from the same bytes is what the hand-written reader gives.
    assert (
        OffsetCommitValue.from_avro(
            fastavro.schemaless_reader(
                BytesIO(body),
                schemas.parsed("offset_commit_value", offset_commit_codec.VALUE_VERSION),
            )
        )
        == decoded
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x02\x02\x00\x02\x04", "union branch 2"),  # expire's union has branches 0 and 1
        (b"\x02\x02\x0a", "metadata runs past the end"),
        (b"\x02\x02\x00\x02\x02", "expire's long is missing"),
        (b"\x02\x02\x00\x02\x00\x00", "a trailing byte"),
    ],
)
def test_offset_commit_garbage_is_a_codec_error(body: bytes, reason: str) -> None:
    with pytest.raises(CodecError):
        decode_value(RecordType.OFFSET_COMMIT, _VALUE_V2 + body)


_VALUE_V2 = offset_commit_codec.VALUE_VERSION.to_bytes(2, "big")


def test_an_offset_commit_value_out_of_range_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="OffsetCommitValue does not fit"):
        encode_value(OffsetCommitValue(1, "", 0, leader_epoch=1 << 31))
