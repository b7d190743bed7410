"""Model behaviour: offset expiry, PartitionState, and models matching their schemas."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.codecs import SPECS, RecordType, decode_value, encode_value
from kafkacoord.codecs import schemas as schema_files
from kafkacoord.codecs.models import (
    GroupMember,
    GroupMetadataValue,
    OffsetCommitValue,
    PartitionState,
    PartitionValue,
    Reassignment,
)

LONGS = st.integers(-(2**62), 2**62)


# -- OffsetCommitValue.expires_at -------------------------------------------------------


def test_expires_at_defaults_to_commit_plus_retention() -> None:
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp_ms=1_000)
    assert value.expire_timestamp_ms is None
    assert value.expires_at(500) == 1_500
    assert value.expires_at(0) == 1_000


def test_explicit_expire_timestamp_wins() -> None:
    value = OffsetCommitValue(1, "", commit_timestamp_ms=1_000, expire_timestamp_ms=5_000)
    assert value.expires_at(500) == 5_000
    assert value.expires_at(10_000_000) == 5_000
    # Even when it is earlier than commit + retention.
    early = OffsetCommitValue(1, "", commit_timestamp_ms=1_000, expire_timestamp_ms=1_001)
    assert early.expires_at(60_000) == 1_001


def test_explicit_expire_timestamp_zero_is_not_treated_as_absent() -> None:
    value = OffsetCommitValue(1, "", commit_timestamp_ms=1_000, expire_timestamp_ms=0)
    assert value.expires_at(500) == 0


@given(commit=LONGS, retention=LONGS, explicit=st.none() | LONGS)
def test_expires_at_property(commit: int, retention: int, explicit: int | None) -> None:
    value = OffsetCommitValue(7, "m", commit_timestamp_ms=commit, expire_timestamp_ms=explicit)
    # A negative explicit expiry is Kafka's -1 "none given": retention applies.
    expected = commit + retention if explicit is None or explicit < 0 else explicit
    assert value.expires_at(retention) == expected


def test_offset_commit_defaults() -> None:
    value = OffsetCommitValue(1, "m", 2)
    assert value.leader_epoch == -1
    assert value.expire_timestamp_ms is None


# -- PartitionState ---------------------------------------------------------------------


@pytest.mark.parametrize("state", list(PartitionState), ids=lambda s: s.value)
def test_partition_state_round_trip(state: PartitionState) -> None:
    assert PartitionState(state.value) is state
    assert PartitionState[state.name] is state
    assert state == state.value  # a str enum compares equal to its symbol
    value = PartitionValue("t", 0, state, (1,), (1,), 1, 0, 0, 0, 0)
    assert value.to_avro()["state"] == state.value
    assert type(value.to_avro()["state"]) is str
    decoded = decode_value(RecordType.PARTITION, encode_value(value))
    assert isinstance(decoded, PartitionValue)
    assert decoded.state is state


def test_partition_state_matches_schema_symbols() -> None:
    raw = schema_files.raw("partition_value", 1)
    (field,) = [f for f in raw["fields"] if f["name"] == "state"]
    assert field["type"]["symbols"] == [s.value for s in PartitionState]


def test_unknown_partition_state_is_rejected() -> None:
    with pytest.raises(ValueError):
        PartitionState("DELETED")


def test_partition_value_defaults() -> None:
    value = PartitionValue("t", 0, PartitionState.NEW, (), (), -1, 0, 0, 0, 0)
    assert value.reassignment is None
    assert value.election == ""


# -- to_avro / from_avro ----------------------------------------------------------------


def test_nested_models_flatten_to_plain_avro_data() -> None:
    value = GroupMetadataValue(
        "consumer", 1, 10, (GroupMember("m", "c", "h", 1, 2, b"s", b"a", "gi"),), "range", "m"
    )
    data = value.to_avro()
    assert data["members"] == [
        {
            "member_id": "m",
            "client_id": "c",
            "client_host": "h",
            "rebalance_timeout_ms": 1,
            "session_timeout_ms": 2,
            "subscription": b"s",
            "assignment": b"a",
            "group_instance_id": "gi",
        }
    ]
    assert GroupMetadataValue.from_avro(data) == value

    moving = Reassignment((1, 2), (2, 3), (3,), (1,), "ADDING", 5)
    assert moving.to_avro()["original_replicas"] == [1, 2]
    assert Reassignment.from_avro(moving.to_avro()) == moving


def _schema_fields(name: str, version: int) -> set[str]:
    return {f["name"] for f in schema_files.raw(name, version)["fields"]}


@pytest.mark.parametrize("rtype", sorted(SPECS), ids=lambda t: t.name)
def test_model_fields_match_newest_schema(rtype: RecordType) -> None:
    spec = SPECS[rtype]
    for part, cls in (("key", spec.key_cls), ("value", spec.value_cls)):
        name = f"{spec.schema_name}_{part}"
        newest = max(schema_files.versions(name))
        model_fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        assert model_fields == _schema_fields(name, newest), f"{cls.__name__} vs {name}.v{newest}"


def test_nested_model_fields_match_schema() -> None:
    group = schema_files.raw("group_metadata_value", 1)
    (members,) = [f for f in group["fields"] if f["name"] == "members"]
    member_fields = {f["name"] for f in members["type"]["items"]["fields"]}
    assert member_fields == {f.name for f in dataclasses.fields(GroupMember)}

    partition = schema_files.raw("partition_value", 1)
    (reassign,) = [f for f in partition["fields"] if f["name"] == "reassignment"]
    record = next(t for t in reassign["type"] if isinstance(t, dict))
    assert {f["name"] for f in record["fields"]} == {
        f.name for f in dataclasses.fields(Reassignment)
    }


def test_schema_versions_listing() -> None:
    assert schema_files.versions("offset_commit_value") == [1, 2]
    with pytest.raises(KeyError, match="no schema named"):
        schema_files.versions("nope")
