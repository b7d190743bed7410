"""kafkacoord's ACLs as data, and the two forms they are rendered to."""

from __future__ import annotations

from confluent_kafka.admin._acl import AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from typer.testing import CliRunner

from kafkacoord.cli.main import app
from kafkacoord.storage.acls import (
    Acl,
    Resource,
    acl_bindings,
    kafka_acls_commands,
    kafkacoord_acls,
)
from tests.kafka_acls import parse_commands

runner = CliRunner()


def test_only_kafkacoords_principal_may_write_or_alter_the_internal_topics() -> None:
    acls = kafkacoord_acls("User:kc", ["User:r1", "User:r2"], "__x_")
    writes = {"Write", "Create", "Alter", "AlterConfigs", "Delete"}
    assert {a.principal for a in acls if a.operation in writes} == {"User:kc"}
    reader = {
        (a.resource, a.name, a.prefixed, a.operation) for a in acls if a.principal == "User:r1"
    }
    assert reader == {
        (Resource.TOPIC, "__x_", True, "Read"),
        (Resource.TOPIC, "__x_", True, "Describe"),
        (Resource.TOPIC, "*", False, "Describe"),
        (Resource.GROUP, "kafkacoord-", True, "Describe"),
        (Resource.GROUP, "kc-", True, "Describe"),
    }
    assert Acl("User:kc", Resource.TRANSACTIONAL_ID, "__x_", True, "Write") in acls
    # The election group is joined: no reader may join it.
    assert not [
        a
        for a in acls
        if a.principal != "User:kc" and a.name == "__x_" and a.resource is Resource.GROUP
    ]


def test_the_commands_read_back_as_the_acls() -> None:
    acls = kafkacoord_acls("User:kc", ["User:r"])
    lines = kafka_acls_commands(acls, "b:9093", "/etc/admin.properties")
    assert parse_commands(lines) == set(acls)
    assert all(line.startswith("kafka-acls.sh --bootstrap-server b:9093 --command-config "
                               "/etc/admin.properties --add ") for line in lines)  # fmt: skip
    # One line per principal and resource pattern; the wildcard topic quoted for a shell.
    assert len(lines) == len({a.pattern() for a in acls})
    assert any(line.endswith("--topic '*'") for line in lines)


def test_bindings_name_kafkas_resource_types_and_operations() -> None:
    [binding] = acl_bindings([Acl("User:kc", Resource.TOPIC, "__kc_", True, "AlterConfigs")])
    assert binding.restype == ResourceType.TOPIC and binding.name == "__kc_"
    assert binding.resource_pattern_type == ResourcePatternType.PREFIXED
    assert binding.operation == AclOperation.ALTER_CONFIGS
    assert binding.permission_type == AclPermissionType.ALLOW and binding.host == "*"
    [cluster] = acl_bindings([Acl("User:kc", Resource.CLUSTER, "", False, "IdempotentWrite")])
    assert cluster.restype == ResourceType.BROKER and cluster.name == "kafka-cluster"
    assert cluster.operation == AclOperation.IDEMPOTENT_WRITE


def test_kafkacoord_acls_prints_the_commands() -> None:
    result = runner.invoke(
        app, ["acls", "--reader-principal", "User:views", "--topic-prefix", "kc1_", "-b", "h:1"]
    )
    assert result.exit_code == 0, result.output
    printed = parse_commands(result.output.splitlines())
    assert printed == set(kafkacoord_acls("User:kafkacoord", ["User:views"], "kc1_"))


def test_kafkacoord_acls_rejects_a_principal_without_a_type() -> None:
    result = runner.invoke(app, ["acls", "--principal", "kafkacoord"])
    assert result.exit_code == 2
    assert "TYPE:NAME" in result.output
