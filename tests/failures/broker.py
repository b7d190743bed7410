"""The broker a failure scenario runs against, and the embedded implementation."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from kafkacoord.storage.broker import EmbeddedBroker


class BrokerControl(Protocol):
    kind: str
    """"tansu-embedded", "tansu-container" or "apache-kafka"."""

    loses_data_on_restart: bool
    """True for ``memory://`` brokers: a restart empties every topic."""

    @property
    def bootstrap(self) -> str: ...

    def restart(self) -> None:
        """Stop the broker and start it again on the same address."""


class EmbeddedBrokerControl:
    """A private embedded tansu broker (``memory://``) that a scenario may restart."""

    kind = "tansu-embedded"
    loses_data_on_restart = True

    def __init__(self, log_dir: Path) -> None:
        self._broker = EmbeddedBroker(log_path=log_dir / "tansu.log")

    @property
    def bootstrap(self) -> str:
        return self._broker.bootstrap

    def start(self) -> EmbeddedBrokerControl:
        self._broker.start()
        return self

    def restart(self) -> None:
        self._broker.stop()
        self._broker.start()

    def stop(self) -> None:
        self._broker.stop()
