"""The CLI's JSON answers against their schemas, built from a real controller shard's image
mid-reassignment (which a live cluster shows only for a moment), and the exit codes."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from kafkacoord.cli import documents
from kafkacoord.cli.common import ExitCode, exit_code
from kafkacoord.cli.group_reset import reset_document
from kafkacoord.cli.render import PartitionFilter, describe_topics, select_partitions
from kafkacoord.cli.topics import configs_document
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from tests.unit.controller.support import Cluster, quiet_config

SCHEMAS = resources.files("kafkacoord.cli").joinpath("schemas")


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMAS.joinpath(f"{name}.json").read_text()))


def valid(name: str, document: Any) -> Any:
    # Through JSON and back, as a script sees it.
    parsed = json.loads(json.dumps(document))
    validator(name).validate(parsed)
    return parsed


def test_every_schema_is_a_valid_2020_12_schema() -> None:
    names = sorted(p.name for p in SCHEMAS.iterdir() if p.name.endswith(".json"))
    assert len(names) == 15
    for name in names:
        Draft202012Validator.check_schema(json.loads(SCHEMAS.joinpath(name).read_text()))


@pytest.fixture
def moving() -> Cluster:
    """Nodes 1-4; t-0 on [1, 2] being moved to [3, 4]; u-0 on [2]."""
    c = Cluster(quiet_config())
    c.add_nodes([1, 2, 3], rack="r1")
    c.register(4)
    c.create("t", assignment={0: [1, 2], 1: [2, 1]}, configs={"min.insync.replicas": "2"})
    c.create("u", assignment={0: [2]})
    c.ok(api.AlterReassignments(reassignments=[
        api.ReassignmentTarget(topic="t", partition=0, replicas=[3, 4])]))  # fmt: skip
    return c


def test_a_reassignment_in_flight_as_json(moving: Cluster) -> None:
    image = moving.shard.image
    [listed] = valid("reassign-list", documents.reassignment_list(image))["reassignments"]
    assert (listed["topic"], listed["partition"], listed["target_replicas"]) == ("t", 0, [3, 4])
    assert listed["adding_replicas"] == [3, 4] and listed["removing_replicas"] == [1, 2]

    described = valid("topics-describe", documents.topic_descriptions(
        select_partitions(image, ["t"], PartitionFilter()), False))  # fmt: skip
    [t] = described["topics"]
    assert (t["partition_count"], t["configs"]) == (2, {"min.insync.replicas": "2"})
    first = t["partitions"][0]
    assert first["replicas"] == [3, 4, 1, 2] and first["adding_replicas"] == [3, 4]

    verified = valid("reassign-verify", documents.reassignment_verification(
        image, {("t", 0): [3, 4], ("t", 1): [2, 1], ("u", 0): [1], ("v", 0): [1]}))  # fmt: skip
    assert verified["complete"] is False
    assert [p["status"] for p in verified["partitions"]] == [
        "in_progress", "completed", "mismatch", "missing"]  # fmt: skip


def test_nodes_and_filtered_topics_as_json(moving: Cluster) -> None:
    image = moving.shard.image
    nodes = {n["id"]: n for n in valid("nodes-list", documents.node_list(image))["nodes"]}
    assert (nodes[1]["rack"], nodes[4]["rack"]) == ("r1", None)
    assert nodes[1]["endpoints"] == {"app": "host1:9000"}
    assert {n["state"] for n in nodes.values()} == {"UNFENCED"}
    assert valid("topics-list", documents.topic_list(image))["topics"] == ["t", "u"]
    # u-0 is whole; under a filter only topics with a matching partition are listed.
    only = PartitionFilter(under_min_isr=True)
    filtered = documents.topic_descriptions(select_partitions(image, None, only), True)
    assert "u" not in [t["name"] for t in valid("topics-describe", filtered)["topics"]]
    # The table is what it was: a header line per topic, then its partitions.
    lines = describe_topics(image, ["u"])
    assert lines[0].startswith("Topic: u\tTopicId: ") and len(lines) == 2


def test_election_results_as_json() -> None:
    results = [
        api.PartitionResult(topic="t", partition=0),
        api.PartitionResult(topic="t", partition=1, error=ErrorCode.ELECTION_NOT_NEEDED),
        api.PartitionResult(
            topic="t",
            partition=2,
            error=ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            message="3 is not in the ISR",
        ),
    ]
    answer = valid("elect-leaders", documents.election_results("preferred", results))
    assert [p["outcome"] for p in answer["partitions"]] == ["elected", "not_needed", "failed"]


def test_a_topics_configs_as_json(moving: Cluster) -> None:
    reply = moving.ok(api.DescribeTopicConfigs(topic="t"))
    answer = valid("topics-describe-configs", configs_document("t", reply.configs))
    assert answer["configs"][0] == {"name": "min.insync.replicas", "value": "2",
                                    "default": "1", "source": "DYNAMIC_TOPIC_CONFIG"}  # fmt: skip


def test_a_reset_plan_as_json() -> None:
    plans = {"g": {("t", 1): 7, ("t", 0): 5}, "h": {}}
    errors = {"g": {("t", 1): ErrorCode.UNKNOWN_MEMBER_ID}}
    answer = valid("groups-reset-offsets", reset_document(plans, errors, executed=True))
    assert answer == {"executed": True, "groups": [
        {"group_id": "g", "partitions": [
            {"topic": "t", "partition": 0, "new_offset": 5, "error": None},
            {"topic": "t", "partition": 1, "new_offset": 7, "error": "UNKNOWN_MEMBER_ID"}]},
        {"group_id": "h", "partitions": []}]}  # fmt: skip


def test_a_schema_rejects_what_it_does_not_name() -> None:
    with pytest.raises(ValidationError):
        validator("topics-list").validate({"topics": ["a"], "extra": 1})
    with pytest.raises(ValidationError):
        validator("nodes-list").validate({"nodes": [{"id": "1"}]})


def test_exit_codes_by_kafka_error() -> None:
    assert exit_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) is ExitCode.NOT_FOUND
    assert exit_code(ErrorCode.GROUP_ID_NOT_FOUND) is ExitCode.NOT_FOUND
    authorization = [c for c in ErrorCode if c.name.endswith("_AUTHORIZATION_FAILED")]
    assert authorization and {exit_code(c) for c in authorization} == {ExitCode.REFUSED}
    assert exit_code(ErrorCode.TOPIC_ALREADY_EXISTS) is ExitCode.REFUSED
    assert exit_code(ErrorCode.REQUEST_TIMED_OUT) is ExitCode.UNREACHABLE
    assert exit_code(ErrorCode.NOT_CONTROLLER) is ExitCode.UNREACHABLE
    assert exit_code(ErrorCode.UNKNOWN_SERVER_ERROR) is ExitCode.FAILED
    assert len({int(c) for c in ExitCode}) == len(ExitCode) == 6


def test_a_partitions_explanation_as_json() -> None:
    from kafkacoord.cli.explain import explain_partition_document
    from kafkacoord.client.explanations import explain_partition
    from kafkacoord.codecs.models import DecisionValue, PartitionValue

    c = Cluster(quiet_config())
    c.add_nodes([1, 2, 3])
    c.create("t", assignment={0: [1, 2, 3]})
    c.ok(api.FenceNode(node_id=1))
    decisions = {r.key: r.value for r in c.log if isinstance(r.value, DecisionValue)}
    records = [(i, 1_000 * i, r.value) for i, r in enumerate(c.log)
               if isinstance(r.value, PartitionValue) and r.value.partition == 0]  # fmt: skip
    steps = explain_partition([*records, (99, 99_000, None)], decisions)
    answer = valid("explain-partition", explain_partition_document("t", 0, steps))
    first, moved = answer["decisions"][0], answer["decisions"][-2]
    assert first["changes"]["leader"] == [None, 1] and first["trigger"]["kind"] == "topic_created"
    assert moved["changes"]["leader"] == [1, 2] and moved["rule"] == "offline"
    deleted = answer["decisions"][-1]
    assert deleted["changes"] == {} and deleted["cause"] == "deleted"


def test_a_groups_explanation_as_json() -> None:
    from kafkacoord.cli.explain_group import explain_group_document
    from kafkacoord.client.group_explanations import explain_group
    from kafkacoord.coordinator.protocol import group_api as gapi
    from tests.unit.groups.groupdriver import Driver, commit_body, join_body

    d = Driver()
    a, b = d.form_group("g", 2)
    d.call(gapi.LeaveGroup(group_id="g", members=[gapi.MemberIdentity(member_id=b.member_id)]))
    d.sync_all("g", [d.join_response(d.request(join_body("g", a.member_id)))], {"t": 3})
    d.call(gapi.LeaveGroup(group_id="g", members=[gapi.MemberIdentity(member_id=a.member_id)]))
    d.call(commit_body("g", {("t", 0): 7}, reset=True))
    d.call(gapi.DeleteGroups(groups=["g"]))
    steps = explain_group((i, d.now, r.key, r.value) for i, r in enumerate(d.log))
    answer = valid("explain-group", explain_group_document("g", steps))
    assert answer["group"] == "g"
    kinds = [s["kind"] for s in answer["steps"]]
    assert kinds == ["rebalance", "rebalance", "rebalance", "admin", "admin", "deleted"]
    left = answer["steps"][1]
    assert left["generation"] == [1, 2] and left["members"] == [2, 1]
    assert left["cause"]["kind"] == "member_left" and left["cause"]["member_id"] == b.member_id
    reset, deleted = answer["steps"][3]["admin"], answer["steps"][4]["admin"]
    assert reset["action"] == "offsets_reset" and reset["principal"] is None
    assert reset["offsets"] == [{"topic": "t", "partition": 0, "before": None, "after": 7}]
    assert deleted["action"] == "group_deleted" and deleted["offsets"][0]["before"] == 7
    with pytest.raises(ValidationError):
        validator("explain-group").validate({**answer, "steps": [{**left, "kind": "other"}]})
