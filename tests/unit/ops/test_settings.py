"""The endpoint's settings: loopback by default, port 0 for any port, -1 to turn it off."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kafkacoord.server.ops import DISABLED_PORT
from kafkacoord.server.settings import load_settings


def test_defaults_listen_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAFKACOORD_CONFIG", "KAFKACOORD_METRICS_HOST", "KAFKACOORD_METRICS_PORT"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert (settings.metrics_host, settings.metrics_port) == ("127.0.0.1", 9464)


def test_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    monkeypatch.setenv("KAFKACOORD_METRICS_HOST", "0.0.0.0")
    monkeypatch.setenv("KAFKACOORD_METRICS_PORT", str(DISABLED_PORT))
    settings = load_settings()
    assert (settings.metrics_host, settings.metrics_port) == ("0.0.0.0", -1)


@pytest.mark.parametrize("port", [-2, 65536])
def test_out_of_range_ports_are_rejected(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    monkeypatch.delenv("KAFKACOORD_CONFIG", raising=False)
    with pytest.raises(ValidationError, match="metrics_port"):
        load_settings(metrics_port=port)
