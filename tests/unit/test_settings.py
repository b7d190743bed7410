"""Daemon settings: precedence of file, environment and flags; clear validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kafkacoord.server.settings import load_settings

EXAMPLE = Path(__file__).parents[2] / "deploy" / "kafkacoord.example.toml"


def test_the_shipped_example_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    settings = load_settings(EXAMPLE)
    assert settings.bootstrap == "127.0.0.1:9092"
    assert settings.node_id == 1 and settings.rack == "rack-a"
    assert settings.offsets_retention_ms == 10080 * 60_000


def test_env_beats_file_and_flags_beat_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kc.toml"
    config.write_text('node_id = 7\noffsets_partitions = 3\ntopic_prefix = "file_"\n')
    monkeypatch.setenv("KAFKACOORD_OFFSETS_PARTITIONS", "5")
    settings = load_settings(config, node_id=9)
    assert (settings.node_id, settings.offsets_partitions, settings.topic_prefix) == (9, 5, "file_")
    assert settings.topics.offsets == "file_offsets"
    assert settings.topics.offsets_partitions == 5


def test_config_file_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kc.toml"
    config.write_text("node_id = 4\n")
    monkeypatch.setenv("KAFKACOORD_CONFIG", str(config))
    assert load_settings().node_id == 4


def test_bad_settings_are_rejected_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    with pytest.raises(ValidationError, match="offsets_partitions"):
        load_settings(offsets_partitions=0)
    config = tmp_path / "kc.toml"
    config.write_text("no_such_setting = 1\n")
    with pytest.raises(ValidationError, match="no_such_setting"):
        load_settings(config)
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_settings(tmp_path / "missing.toml")


def test_listener_and_tls_settings_must_be_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    with pytest.raises(ValidationError, match="tls_cert and tls_key go together"):
        load_settings(tls_cert=Path("c.pem"))
    with pytest.raises(ValidationError, match="needs tls_cert and tls_key"):
        load_settings(tls_client_ca=Path("ca.pem"))
    with pytest.raises(ValidationError, match="admin_principals needs mutual TLS"):
        load_settings(admin_principals=["CN=admin"])
    with pytest.raises(ValidationError, match="listen"):
        load_settings(listen="no-port")
    settings = load_settings(
        listen="0.0.0.0:0", advertised_listener="kc-1:9192", max_frame_bytes=4096,
        tls_cert=Path("c.pem"), tls_key=Path("k.pem"), tls_client_ca=Path("ca.pem"),
        admin_principals=["User:CN=admin"],
    )  # fmt: skip
    limits = settings.listener_limits()
    assert (limits.max_frame_bytes, limits.max_inflight_per_connection) == (4096, 1000)
    assert settings.client_tls() is None  # no tls_ca: this process's clients use plaintext


def test_retired_request_topic_settings_are_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    with pytest.raises(ValidationError, match="responses_partitions"):
        load_settings(responses_partitions=8)


def test_the_election_session_is_short_only_with_an_embedded_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("KAFKACOORD_BOOTSTRAP", "KAFKACOORD_CONTROLLER_SESSION_TIMEOUT_MS"):
        monkeypatch.delenv(key, raising=False)
    assert load_settings(None).controller_session_ms == 2000
    assert load_settings(None, bootstrap="kafka:9092").controller_session_ms == 6000
    monkeypatch.setenv("KAFKACOORD_CONTROLLER_SESSION_TIMEOUT_MS", "9000")
    assert load_settings(None).controller_session_ms == 9000
