"""Who may use the console, from the settings: never open off loopback, never writing with
the daemon's own certificate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from pydantic import ValidationError

from kafkacoord.console.auth import hash_password
from kafkacoord.server.console_policy import console_http_limits, console_policy
from kafkacoord.server.settings import Settings, load_settings

USERS = {"alice": hash_password("wonderland")}


def _settings(**given: Any) -> Settings:
    return Settings(**given)


def test_on_loopback_reading_is_open_and_writes_are_opt_in() -> None:
    policy = console_policy(_settings())
    assert policy.refusal is None and not policy.auth.login_to_read
    assert policy.writer is None and "console_writes" in policy.read_only_reason
    writing = console_policy(_settings(console_writes=True))
    assert writing.writer is not None and writing.writer.tls is None


def test_off_loopback_the_console_needs_users_and_then_a_login_to_read() -> None:
    refused = console_policy(_settings(metrics_host="0.0.0.0"))
    assert refused.refusal is not None and "console_users" in refused.refusal
    served = console_policy(_settings(metrics_host="0.0.0.0", console_users=USERS))
    assert served.refusal is None and served.auth.login_to_read
    assert served.auth.users.verify("alice", "wonderland")


def test_under_mutual_tls_writes_need_a_certificate_of_the_consoles_own(tmp_path: Path) -> None:
    pki = {n: tmp_path / f"{n}.pem" for n in ("ca", "daemon", "daemon-key", "console",
                                              "console-key")}  # fmt: skip
    mutual = {"tls_cert": pki["daemon"], "tls_key": pki["daemon-key"], "tls_ca": pki["ca"],
              "tls_client_ca": pki["ca"], "admin_principals": ["CN=console"],
              "console_writes": True}  # fmt: skip
    without = console_policy(_settings(**mutual))
    assert without.writer is None
    assert "console_tls_cert" in without.read_only_reason
    own = console_policy(_settings(**mutual, console_tls_cert=pki["console"],
                                   console_tls_key=pki["console-key"]))  # fmt: skip
    assert own.writer is not None and own.writer.tls is not None
    assert (own.writer.tls.cert, own.writer.tls.key) == (pki["console"], pki["console-key"])
    # One-way TLS: the daemon's certificate is not sent with a write either.
    one_way = console_policy(_settings(tls_cert=pki["daemon"], tls_key=pki["daemon-key"],
                                       tls_ca=pki["ca"], console_writes=True))  # fmt: skip
    assert one_way.writer is not None and one_way.writer.tls is not None
    assert one_way.writer.tls.cert is None and one_way.writer.tls.ca == pki["ca"]


def test_the_settings_keep_console_admins_among_users_and_cert_with_key() -> None:
    with pytest.raises(ValidationError, match="console_admins not in console_users: bob"):
        _settings(console_users=USERS, console_admins=["alice", "bob"])
    with pytest.raises(ValidationError, match="console_tls_cert and console_tls_key"):
        _settings(console_tls_cert=Path("c.pem"))
    limits = console_http_limits(_settings(http_threads=2, http_connection_limit=7,
                                           http_channel_timeout_s=9))  # fmt: skip
    assert (limits.threads, limits.connection_limit, limits.channel_timeout_s) == (2, 7, 9)


def test_the_images_and_compose_never_serve_an_open_console(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = Path(__file__).resolve().parents[3]
    dockerfile = (root / "deploy" / "Dockerfile").read_text()
    daemon_stage = dockerfile.rsplit("AS daemon", 1)[1]
    image_env = dict(re.findall(r"^ENV (KAFKACOORD_[A-Z_]+)=(\S+)", daemon_stage, re.M))
    assert image_env["KAFKACOORD_METRICS_HOST"] == "0.0.0.0"
    compose = yaml.safe_load((root / "deploy" / "compose.yaml").read_text())
    daemons = [s for s in compose["services"].values()
               if s.get("build", {}).get("target") == "daemon" and "command" not in s]  # fmt: skip
    assert len(daemons) == 3
    for service in daemons:
        with monkeypatch.context() as patch:
            for variable, value in {**image_env, **service["environment"]}.items():
                patch.setenv(variable, str(value))
            policy = console_policy(load_settings())
        assert policy.refusal is not None or policy.auth.login_to_read
