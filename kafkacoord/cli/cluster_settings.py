"""Which cluster a command talks to: the settings, and the broker they lead to."""

from __future__ import annotations

from pathlib import Path

from kafkacoord.server.settings import Settings, load_settings
from kafkacoord.storage.kafka_security import KAFKACOORD, properties_file

BOOTSTRAP_FILE = "bootstrap"


def find_settings(
    config: Path | None, bootstrap: str | None, kafka_config: Path | None = None
) -> Settings | None:
    """The settings with the broker to reach: the one given, else the local daemon's
    embedded one; None when there is neither. Raises on an invalid configuration."""
    settings = load_settings(config, bootstrap=bootstrap, kafka_config=kafka_config)
    if settings.bootstrap is None:
        written = settings.data_dir / BOOTSTRAP_FILE
        if not written.is_file():
            return None
        if kafka_config is None and settings.kafka_config is None:
            # A secured embedded Kafka: its credentials for kafkacoord lie beside it.
            local = settings.data_dir / "kafka" / properties_file(KAFKACOORD)
            kafka_config = local if local.is_file() else None
        settings = load_settings(
            config, bootstrap=written.read_text().strip(), kafka_config=kafka_config
        )
    return settings
