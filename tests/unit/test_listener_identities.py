"""Who may call what on the listener: the node mapping, the admin list, and the rule that
an open listener needs client authentication or ``allow_plaintext_admin``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from pydantic import ValidationError

from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode
from kafkacoord.coordinator.protocol import controller_api as c
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.server.addresses import is_loopback
from kafkacoord.server.listener_policy import ListenerSecurityError, check_listener
from kafkacoord.server.services.authorize import Authorizer
from kafkacoord.server.settings import Settings, load_settings

ROOT = Path(__file__).parents[2]
MTLS: dict[str, Any] = {
    "tls_cert": Path("c.pem"), "tls_key": Path("k.pem"), "tls_client_ca": Path("ca.pem"),
}  # fmt: skip


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    for name in Settings.model_fields:
        monkeypatch.delenv(f"KAFKACOORD_{name.upper()}", raising=False)


def test_every_node_api_names_the_node_it_acts_as() -> None:
    nodes = {name for name, spec in ALL_APIS.items() if spec.node}
    assert nodes == {
        "RegisterNode", "NodeHeartbeat", "AlterPartition", "ReplicaStatus", "ControlledShutdown",
    }  # fmt: skip
    for name in nodes:
        assert "node_id" in ALL_APIS[name].request.model_fields, name


def _status(node_id: int) -> c.ReplicaStatus:
    return c.ReplicaStatus(node_id=node_id, node_epoch=1, topic="t", partition=0,
                           leader_epoch=0, caught_up=True)  # fmt: skip


def test_a_principal_acts_only_as_its_own_nodes() -> None:
    authorizer = Authorizer(["CN=admin"], {"User:CN=node-3": [3], "CN=node-4": [4, 5]})
    register = ALL_APIS["RegisterNode"]
    assert (
        authorizer.refusal(register, c.RegisterNode(node_id=3, incarnation="i"), "CN=node-3")
        is None
    )
    assert authorizer.refusal(ALL_APIS["ReplicaStatus"], _status(5), "CN=node-4") is None
    refused = authorizer.refusal(ALL_APIS["ReplicaStatus"], _status(3), "CN=node-4")
    assert refused is not None and refused.message.endswith("maps it to nodes 4, 5")
    refused = authorizer.refusal(register, c.RegisterNode(node_id=4, incarnation="i"), "CN=node-3")
    assert refused is not None and refused.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.message == (
        "principal 'CN=node-3' may not call RegisterNode as node 4 (CLUSTER_ACTION): "
        "node_principals maps it to node 3"
    )
    # An admin holds no node's right.
    beat = c.NodeHeartbeat(node_id=3, node_epoch=1)
    refused = authorizer.refusal(ALL_APIS["NodeHeartbeat"], beat, "CN=admin")
    assert refused is not None and "it is not in node_principals" in refused.message
    refused = authorizer.refusal(ALL_APIS["NodeHeartbeat"], beat, None)
    assert refused is not None and refused.message.startswith("an anonymous client")


def test_a_controlled_shutdown_is_the_nodes_own_or_an_admins() -> None:
    authorizer = Authorizer(["CN=admin"], {"CN=node-3": [3]})
    spec = ALL_APIS["ControlledShutdown"]
    body = c.ControlledShutdown(node_id=3, node_epoch=1)
    assert authorizer.refusal(spec, body, "CN=node-3") is None
    assert authorizer.refusal(spec, body, "CN=admin") is None
    refused = authorizer.refusal(spec, body, "CN=app")
    assert refused is not None and refused.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.message.endswith("it is not in node_principals nor in admin_principals")


def test_admin_writes_are_refused_with_kafkas_code_for_their_resource() -> None:
    authorizer = Authorizer(["User:CN=admin"])
    cases = {
        "CreateTopic": (c.CreateTopic(name="t"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        "DeleteGroups": (g.DeleteGroups(groups=["g"]), ErrorCode.GROUP_AUTHORIZATION_FAILED),
        "FenceNode": (c.FenceNode(node_id=1), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    }
    for name, (body, code) in cases.items():
        assert authorizer.refusal(ALL_APIS[name], body, "CN=admin") is None
        refused = authorizer.refusal(ALL_APIS[name], body, "CN=app")
        assert refused is not None and refused.code is code, name
        assert (
            refused.message
            == f"principal 'CN=app' may not call {name}; it is not in admin_principals"
        )
    # Neither admin nor node: any authenticated client.
    assert authorizer.refusal(ALL_APIS["ListGroups"], g.ListGroups(), "CN=app") is None


def test_node_principals_from_toml_and_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kc.toml"
    config.write_text(
        'tls_cert = "c.pem"\ntls_key = "k.pem"\ntls_client_ca = "ca.pem"\n'
        '[node_principals]\n"CN=node-3" = [3]\n"User:CN=node-4,O=acme" = [4, 5]\n'
    )
    assert load_settings(config).node_principals == {
        "CN=node-3": [3],
        "User:CN=node-4,O=acme": [4, 5],
    }
    monkeypatch.setenv("KAFKACOORD_NODE_PRINCIPALS", '{"CN=kc-1": [1], "CN=node-3": [6]}')
    # pydantic-settings merges a table across sources: the variable wins per principal.
    assert load_settings(config).node_principals == {
        "CN=node-3": [6], "User:CN=node-4,O=acme": [4, 5], "CN=kc-1": [1],
    }  # fmt: skip
    with pytest.raises(ValidationError, match="node_principals needs mutual TLS"):
        load_settings(node_principals={"CN=kc-1": [1]})
    with pytest.raises(ValidationError, match="node_principals"):
        load_settings(node_principals={"CN=kc-1": [-1]}, **MTLS)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "[::1]", "::1", "localhost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "", "[::]", "10.0.0.5", "192.168.1.2"])
def test_hosts_others_reach(host: str) -> None:
    assert not is_loopback(host)


def test_an_open_listener_needs_client_authentication_or_the_operators_word() -> None:
    assert check_listener(load_settings()) is None  # the default: loopback
    with pytest.raises(ListenerSecurityError, match="allow_plaintext_admin") as info:
        check_listener(load_settings(listen="0.0.0.0:9192"))
    assert "mutual TLS" in str(info.value) and "0.0.0.0:9192" in str(info.value)
    # TLS without client certificates authenticates no client either.
    with pytest.raises(ListenerSecurityError):
        check_listener(load_settings(listen="10.1.2.3:9192", tls_cert=Path("c"), tls_key=Path("k")))
    assert check_listener(load_settings(listen="0.0.0.0:9192", **MTLS)) is None
    warning = check_listener(load_settings(listen="0.0.0.0:9192", allow_plaintext_admin=True))
    assert warning is not None and "allow_plaintext_admin is set" in warning
    # Set on loopback too, it still says so at every start.
    assert check_listener(load_settings(allow_plaintext_admin=True)) is not None


def test_the_shipped_deployments_start(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_listener(load_settings(ROOT / "deploy" / "kafkacoord.example.toml")) is None
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    daemons = [s for name, s in compose["services"].items() if name.startswith("kafkacoord-")]
    assert len(daemons) == 3
    for service in daemons:
        with monkeypatch.context() as patch:
            for key, value in service["environment"].items():
                patch.setenv(key, str(value))
            check_listener(load_settings())  # raises if the daemon would refuse
